// Appended to a report page by tests/it/html.rs, after the report's own
// script has run. `#check` measures every chart label's box as the browser
// lays it out (getBoundingClientRect), in every module, before and after
// zooming, panning and resetting with synthetic events, and writes what it
// found as JSON into <pre id="hlomem-test"> for --dump-dom; `#zoom` zooms the
// first chart for a screenshot.
(function () {
  'use strict';
  var mode = location.hash.slice(1);
  var out = { mode: mode, states: 0, texts: 0, problems: [] };
  var roots = Array.prototype.slice.call(document.querySelectorAll('div.hlomem-report'));

  function visibleCharts(root) {
    return Array.prototype.filter.call(root.querySelectorAll('svg.chart'), function (svg) {
      return svg.getBoundingClientRect().width > 0;
    });
  }

  function check(state) {
    out.states += 1;
    roots.forEach(function (root) {
      visibleCharts(root).forEach(function (svg) {
        var box = svg.getBoundingClientRect();
        var texts = Array.prototype.map.call(svg.querySelectorAll('text'), function (t) {
          return { s: t.textContent, c: t.getAttribute('class'), b: t.getBoundingClientRect() };
        }).filter(function (t) { return t.b.width > 0; });
        out.texts += texts.length;
        texts.forEach(function (t, i) {
          if (t.b.left < box.left - 0.5 || t.b.right > box.right + 0.5 ||
              t.b.top < box.top - 0.5 || t.b.bottom > box.bottom + 0.5) {
            out.problems.push(state + ': "' + t.s + '" (' + t.c + ') is outside its chart');
          }
          texts.slice(i + 1).forEach(function (u) {
            var x = Math.min(t.b.right, u.b.right) - Math.max(t.b.left, u.b.left);
            var y = Math.min(t.b.bottom, u.b.bottom) - Math.max(t.b.top, u.b.top);
            if (x > 0.01 && y > 0.01) {
              out.problems.push(state + ': "' + t.s + '" (' + t.c + ') overlaps "' + u.s + '" (' + u.c + ')');
            }
          });
        });
        // The plot's viewport (which clips it) keeps its size, whatever the page's CSS.
        var plot = svg.querySelector('svg.plot'), size = getComputedStyle(plot);
        if (size.width !== plot.getAttribute('width') + 'px' || size.height !== plot.getAttribute('height') + 'px') {
          out.problems.push(state + ': the plot is ' + size.width + ' by ' + size.height);
        }
      });
    });
  }

  // Synthetic input at a fraction of the plot's width, in its middle.
  function at(svg, f) {
    var r = svg.getBoundingClientRect(), vb = svg.viewBox.baseVal, d = svg.dataset;
    return {
      clientX: r.left + (+d.left + f * d.plotWidth) * r.width / vb.width,
      clientY: r.top + (+d.top + d.plotHeight / 2) * r.height / vb.height,
      bubbles: true,
      cancelable: true
    };
  }
  function wheel(svg, f, extra) {
    var init = at(svg, f);
    for (var k in extra) { init[k] = extra[k]; }
    svg.dispatchEvent(new WheelEvent('wheel', init));
  }
  function pointer(svg, type, f, shift) {
    var init = at(svg, f);
    init.pointerId = 1;
    init.isPrimary = true;
    init.button = 0;
    init.shiftKey = !!shift;
    svg.dispatchEvent(new PointerEvent(type, init));
  }
  function drag(svg, f0, f1, shift) {
    pointer(svg, 'pointerdown', f0, shift);
    pointer(svg, 'pointermove', (f0 + f1) / 2, shift);
    pointer(svg, 'pointermove', f1, shift);
    pointer(svg, 'pointerup', f1, shift);
  }
  function reset(svg) { svg.dispatchEvent(new MouseEvent('dblclick', { bubbles: true })); }
  function shown(svg) { return svg.getAttribute('data-shown') || ''; }

  function exercise(svg, name) {
    var steps = +svg.dataset.steps, ticks = svg.querySelector('g.xticks').innerHTML;
    check(name);
    [0.1, 0.5, 0.97].forEach(function (f) {
      wheel(svg, f, { ctrlKey: true, deltaY: -400 });
      check(name + ', ctrl+wheel at ' + f);
    });
    if (steps > 8 && !shown(svg)) { out.problems.push(name + ': ctrl+wheel did not zoom'); }
    wheel(svg, 0.5, { shiftKey: true, deltaY: 300 });
    check(name + ', shift+wheel');
    reset(svg);
    if (shown(svg) || svg.querySelector('g.xticks').innerHTML !== ticks) {
      out.problems.push(name + ': double-click did not restore the chart as drawn');
    }
    drag(svg, 0.2, 0.6);
    check(name + ', dragged across 0.2-0.6');
    if (steps > 20) {
      var range = shown(svg).split(' ').map(Number);
      if (Math.abs(range[0] - 0.2 * steps) > 1 || Math.abs(range[1] - 0.6 * steps) > 1) {
        out.problems.push(name + ': dragging across 0.2-0.6 of ' + steps + ' steps showed ' + shown(svg));
      }
      if (svg.querySelectorAll('g.xticks text').length < 2) {
        out.problems.push(name + ': fewer than two step ticks when zoomed');
      }
    }
    drag(svg, 0.3, 0.9, true);
    check(name + ', shift+dragged');
    // Far from the peak: its label points to it from the plot's edge.
    var peakStep = +svg.querySelector('text.peak-label').getAttribute('data-step');
    var span = Math.max(4 / steps, 0.05);
    var f = peakStep / steps > 0.5 ? 0.002 : 0.998 - span;
    reset(svg);
    drag(svg, f, f + span);
    check(name + ', zoomed away from the peak');
    var label = svg.querySelector('text.peak-label').textContent;
    if (steps > 20 && label.indexOf('←') < 0 && label.indexOf('→') < 0) {
      out.problems.push(name + ': zoomed to ' + shown(svg) + ', away from the peak at ' + peakStep +
        ', its label says ' + label);
    }
    reset(svg);
  }

  // Computed styles of the report's elements (its root aside), to compare a
  // notebook's rendering with the page's.
  function signature(root) {
    var props = ['display', 'text-align', 'white-space', 'vertical-align', 'padding-top', 'padding-right',
      'padding-bottom', 'padding-left', 'margin-top', 'margin-right', 'margin-bottom', 'margin-left',
      'background-color', 'color', 'font-size', 'font-family', 'font-weight', 'font-style', 'line-height',
      'table-layout', 'border-top-width', 'border-left-width', 'list-style-type', 'max-width', 'width'];
    return Array.prototype.filter.call(root.querySelectorAll('*'), function (e) {
      return !(e instanceof SVGElement) && e.tagName !== 'SCRIPT' && e.tagName !== 'STYLE';
    }).map(function (e) {
      var cs = getComputedStyle(e);
      var name = e.tagName.toLowerCase() + (e.className ? '.' + e.className : '');
      return name + ' ' + props.map(function (p) {
        // Widths of blocks follow the container; those of cells and inline
        // elements follow the styles compared here.
        var block = ['block', 'flex', 'list-item'].indexOf(cs.display) >= 0;
        return p === 'width' && block ? '' : p + ':' + cs.getPropertyValue(p);
      }).join(';');
    });
  }

  if (mode === 'check') {
    out.signature = roots.length ? signature(roots[0]) : [];
    out.ready = document.querySelectorAll('div.hlomem-report[data-ready]').length;
    var ids = Array.prototype.map.call(document.querySelectorAll('[id]'), function (e) { return e.id; });
    out.duplicateIds = ids.filter(function (id, i) { return ids.indexOf(id) !== i; });
    var outside = document.querySelector('table.outside td');
    if (outside) { out.outsideAlign = getComputedStyle(outside).textAlign; }
    roots.forEach(function (root, r) {
      var select = root.querySelector('.pick select');
      if (select) {
        Array.prototype.forEach.call(select.options, function (option, i) {
          select.value = option.value;
          select.dispatchEvent(new Event('change'));
          visibleCharts(root).forEach(function (svg) { exercise(svg, 'report ' + r + ', module ' + i); });
        });
        select.value = '0';
        select.dispatchEvent(new Event('change'));
      } else {
        visibleCharts(root).forEach(function (svg, i) { exercise(svg, 'report ' + r + ', chart ' + i); });
      }
    });
  } else if (mode === 'static') {
    // The page without its script: every chart at once, as drawn.
    out.sections = document.querySelectorAll('section.module').length;
    out.visibleCharts = roots.reduce(function (n, root) { return n + visibleCharts(root).length; }, 0);
    out.zoombars = document.querySelectorAll('.zoombar').length;
    check('as drawn, without the script');
  } else if (mode === 'zoom') {
    // The module with the longest schedule, zoomed past its peak.
    var charts = Array.prototype.slice.call(roots[0].querySelectorAll('svg.chart'));
    var longest = charts.reduce(function (m, c) { return +c.dataset.steps > +m.dataset.steps ? c : m; });
    var select = roots[0].querySelector('.pick select');
    if (select) {
      select.value = String(charts.indexOf(longest));
      select.dispatchEvent(new Event('change'));
    }
    var svg = longest;
    drag(svg, 0.55, 0.9);
    out.shown = shown(svg);
    check('zoomed');
  }
  var pre = document.createElement('pre');
  pre.id = 'hlomem-test';
  pre.hidden = true;
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();

(function () {
  'use strict';
  // Runs once per report on the page (a notebook may hold several, and may
  // run this script away from its report): each report not yet set up.
  var NS = 'http://www.w3.org/2000/svg';
  var GAP = 6;
  var each = function (list, f) { Array.prototype.forEach.call(list, f); };
  each(document.querySelectorAll('div.hlomem-report:not([data-ready])'), function (root) {
    var n = (window.hlomemReports = (window.hlomemReports || 0) + 1);
    if (n > 1) { uniqueIds(root, 'r' + n + '-'); }
    setUp(root);
    root.setAttribute('data-ready', '1');
  });

  // The second report on a page renames its ids, so that its links lead to its own rows.
  function uniqueIds(root, prefix) {
    each(root.querySelectorAll('[id]'), function (e) { e.id = prefix + e.id; });
    each(root.querySelectorAll('a[href^="#"]'), function (a) {
      a.setAttribute('href', '#' + prefix + a.getAttribute('href').slice(1));
    });
  }

  function setUp(root) {
    var sections = root.querySelectorAll('section.module');
    var pick = root.querySelector('.pick');
    if (pick && sections.length > 1) {
      var select = pick.querySelector('select');
      var show = function (i) { each(sections, function (s, j) { s.hidden = j !== i; }); };
      select.addEventListener('change', function () { show(+select.value); });
      show(+select.value || 0);
      pick.hidden = false;
    }
    var tip = root.querySelector('.tip');
    each(sections, function (section) {
      var svg = section.querySelector('svg.chart');
      var buckets = section.querySelector('script.buckets');
      if (svg && buckets) { chart(root, svg, JSON.parse(buckets.textContent), tip); }
    });
  }

  function element(name, attrs) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    return e;
  }

  function niceStep(raw) {
    for (var p = 1; ; p *= 10) {
      if (p >= raw) { return p; }
      if (2 * p >= raw) { return 2 * p; }
      if (5 * p >= raw) { return 5 * p; }
    }
  }

  // One chart: the schedule shown is [a, b) in steps; zooming scales g.zoom
  // along x, redraws the step ticks in their row and moves the peak label in
  // its own, so labels stay apart as the page drew them.
  function chart(root, svg, data, tip) {
    var d = svg.dataset;
    var L = +d.left, T = +d.top, W = +d.plotWidth, H = +d.plotHeight, N = +d.steps;
    var labelY = +d.xlabelY, width = svg.viewBox.baseVal.width;
    var zoom = svg.querySelector('g.zoom'), ticks = svg.querySelector('g.xticks');
    var peak = svg.querySelector('text.peak-label');
    var drawn = { ticks: ticks.innerHTML };
    if (peak) {
      drawn.text = peak.textContent;
      drawn.x = peak.getAttribute('x');
      drawn.anchor = peak.getAttribute('text-anchor');
    }
    var a = 0, b = N, minSpan = Math.min(N, 4);

    var bar = document.createElement('div');
    bar.className = 'zoombar';
    bar.innerHTML = '<button type="button" data-act="in" title="zoom in (+)">+</button>' +
      '<button type="button" data-act="out" title="zoom out (-)">&#8722;</button>' +
      '<button type="button" data-act="reset" title="the whole schedule (0)" disabled>reset zoom</button>' +
      '<span class="range"></span><span class="hint">drag across the chart to zoom in; ' +
      'shift+drag or shift+wheel to pan, ctrl+wheel to zoom, double-click to reset</span>';
    svg.parentNode.insertBefore(bar, svg);
    // A schedule of four steps or fewer shows whole at any zoom.
    bar.hidden = N <= minSpan;
    var range = bar.querySelector('.range'), reset = bar.querySelector('[data-act=reset]');
    bar.addEventListener('click', function (e) {
      var act = e.target.getAttribute && e.target.getAttribute('data-act');
      if (act === 'in') { zoomAt((a + b) / 2, 0.5); }
      if (act === 'out') { zoomAt((a + b) / 2, 2); }
      if (act === 'reset') { show(0, N); }
    });
    svg.setAttribute('tabindex', '0');

    function show(na, nb) {
      var span = Math.max(minSpan, Math.min(N, nb - na));
      var mid = (na + nb) / 2;
      na = Math.max(0, Math.min(N - span, mid - span / 2));
      a = na;
      b = na + span;
      var whole = span >= N;
      if (whole) {
        a = 0;
        b = N;
        zoom.removeAttribute('transform');
        ticks.innerHTML = drawn.ticks;
      } else {
        zoom.setAttribute('transform', 'translate(' + (-W * a / span) + ' 0) scale(' + (N / span) + ' 1)');
        layoutTicks();
      }
      placePeak(whole);
      reset.disabled = whole;
      range.textContent = whole ? '' : 'steps ' + Math.floor(a) + '–' + (Math.ceil(b) - 1) + ' of 0–' + (N - 1);
      svg.setAttribute('data-shown', whole ? '' : a.toFixed(2) + ' ' + b.toFixed(2));
    }

    function zoomAt(s, factor) { show(s - (s - a) * factor, s + (b - s) * factor); }

    function stepAt(x) { return a + (x - L) / W * (b - a); }

    function layoutTicks() {
      while (ticks.firstChild) { ticks.removeChild(ticks.firstChild); }
      var probe = element('text', { x: 0, y: labelY });
      probe.textContent = String(Math.max(0, Math.ceil(b) - 1));
      ticks.appendChild(probe);
      var w = probe.getBBox().width;
      ticks.removeChild(probe);
      var step = niceStep((b - a) / Math.max(1, Math.floor(W / (w + 2 * GAP))));
      var right = -Infinity;
      for (var t = Math.max(0, Math.ceil((a - 0.5) / step) * step); t + 0.5 <= b; t += step) {
        var x = L + W * (t + 0.5 - a) / (b - a);
        var label = element('text', { 'class': 'xtick', x: x, y: labelY, 'text-anchor': 'middle' });
        label.textContent = String(t);
        ticks.appendChild(label);
        var box = label.getBBox();
        var shift = Math.max(0, -box.x) - Math.max(0, box.x + box.width - width);
        if (shift) { label.setAttribute('x', x + shift); box = label.getBBox(); }
        if (box.x < right + GAP) { ticks.removeChild(label); continue; }
        right = box.x + box.width;
        ticks.insertBefore(element('line', { x1: x, x2: x, y1: T + H, y2: T + H + 4, stroke: '#999' }), label);
      }
    }

    function placePeak(whole) {
      if (!peak) { return; }
      if (whole) {
        peak.textContent = drawn.text;
        peak.setAttribute('x', drawn.x);
        peak.setAttribute('text-anchor', drawn.anchor);
        return;
      }
      var text = drawn.text, x = L + W * (+peak.getAttribute('data-step') + 0.5 - a) / (b - a), anchor = 'start';
      if (x < L) { text = '← ' + text; x = L; }
      else if (x > L + W) { text = text + ' →'; x = L + W; anchor = 'end'; }
      else { x += 4; }
      peak.textContent = text;
      peak.setAttribute('x', x);
      peak.setAttribute('text-anchor', anchor);
      var box = peak.getBBox();
      if (box.x + box.width > width) {
        peak.setAttribute('x', Math.min(x - 8, width));
        peak.setAttribute('text-anchor', 'end');
      }
    }

    function point(e) {
      var m = svg.getScreenCTM();
      if (!m) { return { x: -1, y: -1 }; }
      var p = svg.createSVGPoint();
      p.x = e.clientX;
      p.y = e.clientY;
      return p.matrixTransform(m.inverse());
    }
    function inPlot(p) { return p.x >= L && p.x <= L + W && p.y >= T && p.y <= T + H; }
    function clampX(x) { return Math.max(L, Math.min(L + W, x)); }

    // Drag across the plot: select steps to zoom to; with shift: pan.
    var brush = element('rect', { 'class': 'brush', y: T, height: H, fill: 'rgba(78,121,167,0.2)', stroke: '#4e79a7', visibility: 'hidden' });
    svg.appendChild(brush);
    var drag = null;
    svg.addEventListener('pointerdown', function (e) {
      var p = point(e);
      if (e.button !== 0 || !inPlot(p)) { return; }
      drag = { x: p.x, pan: e.shiftKey, a: a, b: b, moved: false };
      try { svg.setPointerCapture(e.pointerId); } catch (err) { /* a synthetic event */ }
      e.preventDefault();
    });
    svg.addEventListener('pointermove', function (e) {
      if (!drag) { return; }
      var x = point(e).x;
      if (Math.abs(x - drag.x) > 3) { drag.moved = true; }
      if (drag.pan) {
        var ds = (x - drag.x) / W * (drag.b - drag.a);
        show(drag.a - ds, drag.b - ds);
      } else if (drag.moved) {
        var x0 = clampX(Math.min(x, drag.x)), x1 = clampX(Math.max(x, drag.x));
        brush.setAttribute('x', x0);
        brush.setAttribute('width', x1 - x0);
        brush.setAttribute('visibility', 'visible');
      }
    });
    svg.addEventListener('pointerup', function (e) {
      if (!drag) { return; }
      var from = drag;
      drag = null;
      brush.setAttribute('visibility', 'hidden');
      if (!from.pan && from.moved) {
        var x = point(e).x;
        show(stepAt(clampX(Math.min(x, from.x))), stepAt(clampX(Math.max(x, from.x))));
      }
    });
    svg.addEventListener('pointercancel', function () { drag = null; brush.setAttribute('visibility', 'hidden'); });
    svg.addEventListener('dblclick', function () { show(0, N); });
    // Ctrl (or a pinch) + wheel zooms at the pointer; shift + wheel, or a
    // sideways wheel, pans; a plain wheel scrolls the page.
    svg.addEventListener('wheel', function (e) {
      var p = point(e);
      if (!inPlot(p)) { return; }
      var unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
      if (e.ctrlKey || e.metaKey) {
        e.preventDefault();
        zoomAt(stepAt(p.x), Math.exp(Math.max(-5, Math.min(5, e.deltaY * unit * 0.002))));
      } else if (a > 0 || b < N) {
        var dx = (e.shiftKey ? e.deltaY || e.deltaX : e.deltaX) * unit;
        if (!dx) { return; }
        e.preventDefault();
        var ds = dx / svg.getBoundingClientRect().width * width / W * (b - a);
        show(a + ds, b + ds);
      }
    }, { passive: false });
    svg.addEventListener('keydown', function (e) {
      var pan = (b - a) / 5, keys = {
        '+': function () { zoomAt((a + b) / 2, 0.5); },
        '=': function () { zoomAt((a + b) / 2, 0.5); },
        '-': function () { zoomAt((a + b) / 2, 2); },
        ArrowLeft: function () { show(a - pan, b - pan); },
        ArrowRight: function () { show(a + pan, b + pan); },
        '0': function () { show(0, N); },
        Escape: function () { show(0, N); }
      };
      if (keys[e.key]) { keys[e.key](); e.preventDefault(); }
    });

    // The tooltip: the bucket under the pointer.
    function bucketAt(s) {
      var lo = 0, hi = data.length - 1;
      while (lo < hi) {
        var mid = (lo + hi + 1) >> 1;
        if (data[mid][0] <= s) { lo = mid; } else { hi = mid - 1; }
      }
      return data.length && data[lo][0] <= s && s <= data[lo][1] ? data[lo] : null;
    }
    svg.addEventListener('mousemove', function (e) {
      var p = point(e), bucket = !drag && inPlot(p) && bucketAt(Math.floor(stepAt(p.x)));
      if (!bucket) { tip.hidden = true; return; }
      tip.textContent = '';
      [
        'steps ' + bucket[0] + (bucket[1] !== bucket[0] ? '–' + bucket[1] : '') + ': ' + bucket[2] + ' in use',
        'parameters ' + bucket[3] + ', outputs ' + bucket[4] + ', temporaries ' + bucket[5],
        bucket[6] + (bucket[7] ? ' at ' + bucket[7] : '')
      ].forEach(function (line) {
        var div = document.createElement('div');
        div.textContent = line;
        tip.appendChild(div);
      });
      tip.hidden = false;
      var r = root.getBoundingClientRect();
      var left = e.clientX - r.left + 12;
      if (e.clientX + 12 + tip.offsetWidth > r.right) { left = Math.max(0, e.clientX - r.left - 12 - tip.offsetWidth); }
      tip.style.left = left + 'px';
      tip.style.top = (e.clientY - r.top + 12) + 'px';
    });
    svg.addEventListener('mouseleave', function () { tip.hidden = true; });
  }
})();

//! Shapes and layouts: `f32[2,3]{1,0:T(8,128)}`, tuples, buffers.

use pest::iterators::Pair;

use super::At;
use crate::error::Error;
use crate::hlo::parse::Rule;
use crate::hlo::shape::{ArrayShape, Dim, ElementType, Layout, Shape, NUMERIC_LAYOUT_FIELDS};

pub(super) fn lower_shape(at: At, pair: Pair<Rule>) -> Result<Shape, Error> {
    let shape = match pair.as_rule() {
        Rule::tuple_shape => Shape::Tuple(
            pair.clone()
                .into_inner()
                .map(|p| lower_shape(at, p))
                .collect::<Result<_, _>>()?,
        ),
        Rule::buffer_shape => match pair.clone().into_inner().next() {
            Some(inner) => Shape::Buffer(Box::new(lower_shape(at, inner)?)),
            None => {
                return Err(at.error(&pair, "expected a shape inside `b(...)`".into(), "empty"))
            }
        },
        _ => Shape::Array(lower_array_shape(at, pair.clone())?),
    };
    if !shape.sizes_fit() {
        return Err(at.error(
            &pair,
            format!("shape `{}` is larger than 2^64 bytes", pair.as_str()),
            "too large to allocate",
        ));
    }
    Ok(shape)
}

fn lower_array_shape(at: At, pair: Pair<Rule>) -> Result<ArrayShape, Error> {
    let mut shape = ArrayShape {
        element: ElementType::F32,
        dims: Vec::new(),
        layout: None,
    };
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::elem_type => {
                shape.element = ElementType::parse(p.as_str()).ok_or_else(|| {
                    at.error(
                        &p,
                        format!("unknown element type `{}`", p.as_str()),
                        "not an XLA element type",
                    )
                })?;
            }
            Rule::dim => {
                let Some(d) = p.into_inner().next() else {
                    continue;
                };
                shape.dims.push(match d.as_rule() {
                    Rule::dynamic_unbounded => Dim::Unbounded,
                    Rule::dynamic_bound => {
                        Dim::Bounded(d.into_inner().next().map_or(Ok(0), |n| at.number(&n))?)
                    }
                    _ => Dim::Static(at.number(&d)?),
                });
            }
            Rule::layout => {
                let layout = lower_layout(at, p.clone())?;
                if let Some(problem) =
                    Layout::order_problem(&layout.minor_to_major, shape.dims.len())
                {
                    return Err(at.error(&p, problem, "invalid layout"));
                }
                shape.layout = Some(layout);
            }
            _ => {}
        }
    }
    Ok(shape)
}

fn lower_layout(at: At, pair: Pair<Rule>) -> Result<Layout, Error> {
    let mut layout = Layout::default();
    let first = |p: Pair<Rule>| p.into_inner().next().map_or(Ok(0), |n| at.number(&n));
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::minor_to_major => {
                layout.minor_to_major = p
                    .into_inner()
                    .map(|n| at.number(&n))
                    .collect::<Result<_, _>>()?
            }
            Rule::tile_field => {
                for tile in p.into_inner() {
                    let dims = tile
                        .into_inner()
                        .map(|d| {
                            if d.as_str() == "*" {
                                Ok(None)
                            } else {
                                at.number(&d).map(Some)
                            }
                        })
                        .collect::<Result<_, _>>()?;
                    layout.tiles.push(dims);
                }
            }
            Rule::element_bits => layout.element_size_bits = Some(first(p)?),
            Rule::memory_space => layout.memory_space = first(p)?,
            Rule::tail_padding => layout.tail_padding = Some(first(p)?),
            _ => {
                let field = p.as_str();
                if NUMERIC_LAYOUT_FIELDS.iter().any(|f| field.starts_with(f)) {
                    return Err(at.error(
                        &p,
                        format!("layout field `{field}` holds numbers only"),
                        "invalid layout field",
                    ));
                }
                layout.other_fields.push(field.to_string())
            }
        }
    }
    Ok(layout)
}

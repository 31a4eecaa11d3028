//! PostgreSQL array literals (`{"a",NULL,"b"}`, `{1,2}`), bound as one text parameter and cast
//! in the statement (`$2::text[]`): the `Any` driver binds no arrays, and one array per column
//! keeps a statement's text the same whatever the batch's length, so it is prepared once per
//! connection instead of once per distinct length (see [`super::dialect::PG_INSERT_ORDERS`]).

/// A `text[]` literal of `values` (`None`: SQL `NULL`), every element quoted, `"` and `\`
/// escaped, so any text round-trips.
pub fn text<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> String {
    let mut out = String::from("{");
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let Some(v) = v else {
            out.push_str("NULL");
            continue;
        };
        out.push('"');
        for c in v.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('"');
    }
    out.push('}');
    out
}

/// A `bigint[]` literal of `values`.
pub fn bigint(values: impl IntoIterator<Item = i64>) -> String {
    use std::fmt::Write;
    let mut out = String::from("{");
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{v}");
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_elements_are_quoted_and_escaped_and_none_is_null() {
        assert_eq!(text([]), "{}");
        assert_eq!(
            text([Some("a"), None, Some(r#"q"u\o,{}"#), Some(""), Some("NULL")]),
            r#"{"a",NULL,"q\"u\\o,{}","","NULL"}"#
        );
        assert_eq!(bigint([1, -2, i64::MAX]), "{1,-2,9223372036854775807}");
        assert_eq!(bigint([]), "{}");
    }
}

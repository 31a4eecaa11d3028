//! Escaping text for the markup oversell writes: XML (JUnit) and HTML share one escaper,
//! Markdown text and table cells another.

/// Escapes text for XML and HTML content and attribute values; drops the characters XML 1.0
/// cannot hold.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// Text for one Markdown table cell: `|` escaped, line breaks folded, no HTML ([`md_text`]).
pub fn md_cell(s: &str) -> String {
    md_text(&s.replace('|', "\\|").replace('\n', " "))
}

/// Free text for Markdown (a verdict, a note quoting a shop's answer): `&` and `<` written as
/// entities, so no text (a target's HTML error page, a `<script>`) is ever read as markup.
pub fn md_text(s: &str) -> String {
    if !s.contains(['&', '<']) {
        return s.to_string();
    }
    s.replace('&', "&amp;").replace('<', "&lt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_xml_and_html() {
        assert_eq!(
            escape(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&apos;"
        );
        assert_eq!(escape("a\u{1}b\n"), "ab\n");
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
        assert_eq!(
            md_text("<script>alert(1)</script> & co -> ok"),
            "&lt;script>alert(1)&lt;/script> &amp; co -> ok"
        );
    }
}

//! What a fetched body becomes in the result: pure functions, the same on the host and in the
//! component.
//!
//! - [`Kind::of`] sorts a response by its `content-type` (or, when the server sent none, by the
//!   first bytes of its body): HTML, text (`text/*`, JSON, XML, JavaScript, YAML, ...) or other.
//! - [`decode`] turns body bytes into text by the `charset` parameter: UTF-8 (the default) and
//!   ISO-8859-1/US-ASCII are decoded exactly; any other charset, and any invalid UTF-8, is
//!   decoded as UTF-8 with the invalid bytes replaced (U+FFFD) and [`Decoded::lossy`] set. A
//!   multi-byte character cut by the read bound is dropped, not replaced.
//! - [`html_to_text`] turns HTML into readable text (html2text, 100 columns, links kept as
//!   numbered references listed at the end). It never panics and its result is at most the
//!   bound it is given; should html2text fail on a document, the document's own text with its
//!   tags stripped is returned instead.
//! - [`cut`] shortens text to at most a number of bytes on a character boundary.

/// How a response's body is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `text/html` or `application/xhtml+xml`: turned into readable text.
    Html,
    /// Text returned as it is: `text/*`, JSON, XML, JavaScript, YAML, TOML, form data.
    Text,
    /// Anything else (images, archives, PDF, ...): described, not shown.
    Other,
}

/// Media types outside `text/*` that are text all the same.
const TEXT_TYPES: &[&str] = &[
    "application/json",
    "application/xml",
    "application/javascript",
    "application/ecmascript",
    "application/x-javascript",
    "application/x-ndjson",
    "application/ndjson",
    "application/yaml",
    "application/x-yaml",
    "application/toml",
    "application/x-toml",
    "application/x-www-form-urlencoded",
    "application/x-sh",
    "application/sql",
    "application/graphql",
    "application/csv",
    "application/markdown",
    "application/problem+json",
];

impl Kind {
    /// The kind of a body of media type `essence` (lowercase, no parameters; see
    /// [`essence`]). `None` when the server sent no `content-type`: then [`Kind::sniff`]
    /// decides from the body.
    pub fn of(essence: Option<&str>) -> Option<Kind> {
        let essence = essence?;
        if essence.is_empty() {
            return None;
        }
        if essence == "text/html" || essence == "application/xhtml+xml" {
            return Some(Kind::Html);
        }
        if essence.starts_with("text/")
            || TEXT_TYPES.contains(&essence)
            || essence.ends_with("+json")
            || essence.ends_with("+xml")
            || essence.ends_with("+yaml")
        {
            return Some(Kind::Text);
        }
        Some(Kind::Other)
    }

    /// The kind of a body sent without a `content-type`, from its first bytes: HTML when it
    /// opens (after white space and a byte-order mark) with `<!doctype html` or `<html`; text
    /// when it is UTF-8 (a character cut at the end is fine) without NUL bytes; other
    /// otherwise.
    pub fn sniff(prefix: &[u8]) -> Kind {
        let start = prefix.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(prefix);
        let start = &start[start
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(start.len())..];
        let opens =
            |tag: &[u8]| start.len() >= tag.len() && start[..tag.len()].eq_ignore_ascii_case(tag);
        if opens(b"<!doctype html") || opens(b"<html") {
            return Kind::Html;
        }
        let valid = match std::str::from_utf8(prefix) {
            Ok(_) => true,
            // Only an incomplete character at the very end (the read bound cut it).
            Err(e) => e.error_len().is_none(),
        };
        if valid && !prefix.contains(&0) {
            Kind::Text
        } else {
            Kind::Other
        }
    }
}

/// The media type of a `content-type` value, lowercase and without parameters
/// (`Text/HTML; charset=UTF-8` → `text/html`).
pub fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The `charset` parameter of a `content-type` value, lowercase, without quotes.
pub fn charset(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"').to_ascii_lowercase())
    })
}

/// Text decoded from a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub text: String,
    /// Some bytes were not valid in the charset and were replaced (or the charset is one this
    /// tool does not decode and UTF-8 was assumed).
    pub lossy: bool,
}

/// `bytes` decoded by `charset` (see the module docs). A leading UTF-8 byte-order mark is
/// dropped.
pub fn decode(bytes: &[u8], charset: Option<&str>) -> Decoded {
    match charset.unwrap_or("utf-8") {
        "iso-8859-1" | "latin1" | "latin-1" | "iso_8859-1" | "l1" | "us-ascii" | "ascii" => {
            Decoded {
                text: bytes.iter().map(|&b| char::from(b)).collect(),
                lossy: false,
            }
        }
        other => {
            let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
            // A character cut by the read bound at the very end is dropped, not replaced.
            let whole = match std::str::from_utf8(bytes) {
                Ok(_) => bytes,
                Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
                Err(_) => bytes,
            };
            let text = String::from_utf8_lossy(whole).into_owned();
            let unknown = !matches!(other, "utf-8" | "utf8");
            let lossy = unknown || std::str::from_utf8(whole).is_err();
            Decoded { text, lossy }
        }
    }
}

/// Columns the HTML text is wrapped to.
pub const HTML_WIDTH: usize = 100;

/// HTML turned into readable text, at most `max_bytes` long (cut on a character boundary).
/// The second value tells whether the text was cut.
pub fn html_to_text(html: &str, max_bytes: usize) -> (String, bool) {
    if tag_depth_over(html, MAX_PARSED_DEPTH) {
        let text = format!(
            "[this page nests elements more than {MAX_PARSED_DEPTH} deep: its text is shown \
             without layout]\n\n{}",
            strip_tags(html).trim()
        );
        let (text, was_cut) = cut(&text, max_bytes);
        return (text.to_string(), was_cut);
    }
    let config = html2text::config::plain()
        .allow_width_overflow()
        .link_footnotes(true);
    let rendered = config
        .parse_html(html.as_bytes())
        .and_then(|dom| {
            flatten_deep(&dom);
            config.dom_to_render_tree(&dom)
        })
        .and_then(|tree| config.render_to_string(tree, HTML_WIDTH))
        .unwrap_or_else(|_| strip_tags(html));
    let (text, was_cut) = cut(rendered.trim_end(), max_bytes);
    (text.to_string(), was_cut)
}

/// Past this nesting of tags (counted as written, see [`tag_depth_over`]) a page is not parsed
/// at all: parsing costs the depth times the number of tags, which a page of a few MiB can
/// make minutes.
pub const MAX_PARSED_DEPTH: usize = 512;

/// Whether the tags of `html`, counted as written, nest deeper than `limit`: each start tag
/// opens, each end tag closes, except void elements (`br`, `img`, ...), self-closing tags and
/// the elements whose end tag may be left out (`p`, `li`, `td`, `tr`, `option`, ...), which are
/// not counted. A linear scan without allocation; comments and scripts are not told apart,
/// which only makes it count a little wrong on odd pages.
pub fn tag_depth_over(html: &str, limit: usize) -> bool {
    const UNCOUNTED: &[&str] = &[
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr", "p", "li", "dt", "dd", "td", "th", "tr", "tbody", "thead",
        "tfoot", "option", "optgroup", "rb", "rt", "rp", "colgroup", "caption", "html", "head",
        "body",
    ];
    let b = html.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(at) = b[i..].iter().position(|&c| c == b'<') {
        i += at + 1;
        let closing = b.get(i) == Some(&b'/');
        if closing {
            i += 1;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_alphanumeric() {
            i += 1;
        }
        if start == i {
            continue;
        }
        let name = &html[start..i];
        let Some(end) = b[i..].iter().position(|&c| c == b'>') else {
            break;
        };
        let self_closing = b[i + end - 1] == b'/';
        i += end + 1;
        if UNCOUNTED.iter().any(|u| u.eq_ignore_ascii_case(name)) {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
        } else if !self_closing {
            depth += 1;
            if depth > limit {
                return true;
            }
        }
    }
    false
}

/// The deepest element nesting laid out as it is. Laying out nests costs more than linear time
/// in their depth (a few thousand nested lists and tables take minutes and hundreds of MiB),
/// while real pages nest a few dozen deep.
pub const MAX_DEPTH: usize = 48;

/// Makes every element deeper than [`MAX_DEPTH`] a direct child of its ancestor at that depth
/// (or, when that ancestor is a list or a table's structure, which show no text of their own,
/// of the nearest ancestor that does), keeping only its own text: all the text stays (its
/// order within a too-deep element can change), the depth is bounded. Templates (never shown)
/// are dropped. Iterative: no recursion whatever the depth.
fn flatten_deep(dom: &html2text::RcDom) {
    let mut stack: Vec<(html2text::Handle, usize)> = vec![(dom.document.clone(), 0)];
    // Each node is flattened at most once: its flattened subtree holds no deeper element.
    let mut flattened = std::collections::HashSet::new();
    while let Some((node, depth)) = stack.pop() {
        if let html2text::Element {
            template_contents, ..
        } = &node.data
        {
            template_contents.borrow_mut().take();
        }
        if depth >= MAX_DEPTH && matches!(node.data, html2text::Element { .. }) {
            let mut at = Some(node);
            while let Some(n) = at.as_ref().filter(|n| hides_text(n, false)) {
                at = n.parent.take().and_then(|weak| {
                    let parent = weak.upgrade();
                    n.parent.set(Some(weak));
                    parent
                });
            }
            if let Some(at) = at
                && flattened.insert(std::rc::Rc::as_ptr(&at))
            {
                flatten(&at);
            }
            continue;
        }
        for child in node.children.borrow().iter() {
            stack.push((child.clone(), depth + 1));
        }
    }
}

/// Whether html2text shows no text placed directly in `node`: a list, a table's structure, a
/// select box, the document's root (and, with `cells`, a table cell, which outside its row
/// is not shown at all).
fn hides_text(node: &html2text::Handle, cells: bool) -> bool {
    match &node.data {
        html2text::Element { name, .. } => match &*name.local {
            "table" | "tbody" | "thead" | "tfoot" | "tr" | "colgroup" | "col" | "caption"
            | "ul" | "ol" | "dl" | "menu" | "select" | "optgroup" | "datalist" | "html"
            | "head" => true,
            "td" | "th" => cells,
            _ => false,
        },
        _ => true,
    }
}

/// `node`'s descendants as its children: its own text nodes first, then each element of its
/// subtree in document order, each holding only its own text nodes.
fn flatten(node: &html2text::Handle) {
    let is_element = |n: &html2text::Handle| matches!(n.data, html2text::Element { .. });
    let own: Vec<html2text::Handle> = std::mem::take(&mut *node.children.borrow_mut());
    let mut flat: Vec<html2text::Handle> = Vec::new();
    let mut pending: Vec<html2text::Handle> = Vec::new();
    for child in own.into_iter().rev() {
        if is_element(&child) {
            pending.push(child);
        } else {
            flat.push(child);
        }
    }
    flat.reverse();
    while let Some(element) = pending.pop() {
        if let html2text::Element {
            template_contents, ..
        } = &element.data
        {
            template_contents.borrow_mut().take();
        }
        let children: Vec<html2text::Handle> = std::mem::take(&mut *element.children.borrow_mut());
        let (mut inner, text): (Vec<_>, Vec<_>) = children.into_iter().partition(is_element);
        inner.reverse();
        pending.extend(inner);
        if hides_text(&element, true) {
            // Its text would not be shown in its new place: keep the text alone.
            for t in &text {
                t.parent.set(Some(std::rc::Rc::downgrade(node)));
            }
            flat.extend(text);
            continue;
        }
        *element.children.borrow_mut() = text;
        element.parent.set(Some(std::rc::Rc::downgrade(node)));
        flat.push(element);
    }
    *node.children.borrow_mut() = flat;
}

/// The text of `html` with every `<...>` dropped: the fallback should html2text fail.
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// `text` cut to at most `max_bytes` bytes on a character boundary, and whether it was cut.
pub fn cut(text: &str, max_bytes: usize) -> (&str, bool) {
    if text.len() <= max_bytes {
        return (text, false);
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// A size for people: `512 bytes`, `3.2 KiB`, `5.0 MiB`.
pub fn size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{:.1} MiB", b / (KIB * KIB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn content_types_are_sorted() {
        for (ct, kind) in [
            ("text/html", Kind::Html),
            ("application/xhtml+xml", Kind::Html),
            ("text/plain", Kind::Text),
            ("text/markdown", Kind::Text),
            ("application/json", Kind::Text),
            ("application/vnd.github+json", Kind::Text),
            ("application/atom+xml", Kind::Text),
            ("application/javascript", Kind::Text),
            ("image/png", Kind::Other),
            ("application/octet-stream", Kind::Other),
            ("application/pdf", Kind::Other),
        ] {
            assert_eq!(Kind::of(Some(ct)), Some(kind), "{ct}");
        }
        assert_eq!(Kind::of(None), None);
        assert_eq!(Kind::of(Some("")), None);
        assert_eq!(essence(" Text/HTML ; charset=UTF-8"), "text/html");
        assert_eq!(
            charset("text/html; Charset=\"ISO-8859-1\"").as_deref(),
            Some("iso-8859-1")
        );
        assert_eq!(charset("text/html"), None);
    }

    #[test]
    fn bodies_without_a_content_type_are_sniffed() {
        assert_eq!(Kind::sniff(b"\n  <!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(Kind::sniff(b"\xEF\xBB\xBF<html lang=en>"), Kind::Html);
        assert_eq!(Kind::sniff(b"{\"a\": 1}"), Kind::Text);
        // A character cut at the end by the read bound is still text.
        assert_eq!(
            Kind::sniff("caf\u{e9}".as_bytes().split_last().unwrap().1),
            Kind::Text
        );
        assert_eq!(Kind::sniff(b"\x89PNG\r\n\x1a\n\0\0"), Kind::Other);
        assert_eq!(Kind::sniff(b"ab\0cd"), Kind::Other);
    }

    #[test]
    fn charsets_are_decoded() {
        assert_eq!(
            decode(b"caf\xe9", Some("iso-8859-1")),
            Decoded {
                text: "café".into(),
                lossy: false
            }
        );
        assert_eq!(
            decode("café".as_bytes(), None),
            Decoded {
                text: "café".into(),
                lossy: false
            }
        );
        // A character cut at the end is dropped, not replaced.
        let cut_char = &"café".as_bytes()[..4];
        assert_eq!(decode(cut_char, Some("utf-8")).text, "caf");
        assert!(!decode(cut_char, Some("utf-8")).lossy);
        let bad = decode(b"a\xffb", None);
        assert_eq!(bad.text, "a\u{fffd}b");
        assert!(bad.lossy);
        assert!(decode(b"abc", Some("shift_jis")).lossy);
        assert_eq!(decode(b"\xEF\xBB\xBFhi", None).text, "hi");
    }

    #[test]
    fn html_becomes_readable_text_with_its_links() {
        let html = r#"<!doctype html><html><head><title>T</title><style>p{color:red}</style>
            <script>var secret = 1;</script></head><body>
            <h1>Release notes</h1><p>Version <b>2.0</b> is out.</p>
            <ul><li>faster</li><li>smaller</li></ul>
            <p>See <a href="https://example.com/changes">the changes</a>.</p></body></html>"#;
        let (text, was_cut) = html_to_text(html, 10_000);
        assert!(!was_cut);
        assert!(text.contains("Release notes"), "{text}");
        assert!(text.contains("Version **2.0** is out."), "{text}");
        assert!(text.contains("* faster"), "{text}");
        assert!(text.contains("https://example.com/changes"), "{text}");
        assert!(!text.contains("<p>"), "{text}");
        assert!(!text.contains("var secret"), "{text}");
        assert!(!text.contains("color:red"), "{text}");
    }

    #[test]
    fn html_text_is_bounded() {
        let html = "<p>".to_string() + &"word ".repeat(10_000) + "</p>";
        let (text, was_cut) = html_to_text(&html, 1000);
        assert!(was_cut);
        assert!(text.len() <= 1000);
        assert!(text.starts_with("word word"));
    }

    #[test]
    fn deeply_nested_html_does_not_break_the_conversion() {
        for unit in [
            "<div>",
            "<table><tr><td>",
            "<ul><li>",
            "<b>",
            "<blockquote>",
            "<div><table><tr><td><ul><li>x ",
        ] {
            let html = unit.repeat(3000) + "bottom" + &"<b>x</b>y<ul></ul>".repeat(20_000);
            assert!(tag_depth_over(&html, MAX_PARSED_DEPTH), "{unit}");
            let started = std::time::Instant::now();
            let (text, _) = html_to_text(&html, 1 << 20);
            assert!(text.contains("bottom"), "{unit}: {text:.300}");
            assert!(
                started.elapsed().as_secs() < 5,
                "{unit}: {:?}",
                started.elapsed()
            );
        }
        // Past 48 but within what is parsed, the deep part is flattened, its text kept.
        let html = "<div><table><tr><td><ul><li>x ".repeat(80) + "bottom";
        assert!(!tag_depth_over(&html, MAX_PARSED_DEPTH));
        let started = std::time::Instant::now();
        let (text, _) = html_to_text(&html, 1 << 20);
        assert!(text.contains("bottom"), "{text:.300}");
        assert_eq!(text.matches('x').count(), 80, "{text:.300}");
        assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
        assert!(!tag_depth_over(
            "<p>a<p>b<br><img src=x><ul><li>c<li>d</ul>",
            1
        ));
        assert!(tag_depth_over("<div><div>", 1));
        assert!(!tag_depth_over("<div></div><div/><div>", 1));
        // Within the depth, the layout is html2text's own.
        let (text, _) = html_to_text("<ul><li>a<ul><li>b</li></ul></li></ul>", 1000);
        assert_eq!(text, "* a\n  * b");
    }

    #[test]
    fn cut_keeps_characters_whole() {
        assert_eq!(cut("héllo", 2), ("h", true));
        assert_eq!(cut("héllo", 3), ("hé", true));
        assert_eq!(cut("abc", 3), ("abc", false));
        assert_eq!(cut("abc", 0), ("", true));
        assert_eq!(size(512), "512 bytes");
        assert_eq!(size(2048), "2.0 KiB");
        assert_eq!(size(5 * 1024 * 1024), "5.0 MiB");
    }

    /// HTML-like text: tags, entities, comments and text in any order.
    fn html_like() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-z ]{0,12}",
            "<(p|div|table|tr|td|th|ul|ol|li|pre|a href=\"x\"|img src=\"y\"|br|h1|script|style|svg|math|template|select|option|textarea|frameset|col|colgroup|caption|thead|tbody)( [a-z]+=\"[^\"]{0,5}\")?>",
            "</(p|div|table|tr|td|ul|ol|li|pre|a|h1|script|style|svg|template|select)>",
            "&(amp|lt|gt|nbsp|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6}|bogus);?",
            "<!--[^>]{0,8}-->",
            "<!(doctype|DOCTYPE) html>",
            "\\PC{0,6}",
        ];
        prop::collection::vec(piece, 0..80).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn any_html_converts_without_panic_within_the_bound(
            html in html_like(),
            max in 0usize..4096,
        ) {
            let (text, was_cut) = html_to_text(&html, max);
            prop_assert!(text.len() <= max);
            if !was_cut {
                prop_assert!(text.len() <= max);
            }
        }

        #[test]
        fn any_nesting_keeps_its_text_within_the_bound(
            opens in prop::collection::vec(
                "<(div|table><tr><td|ul><li|ol><li|b|blockquote|pre|p|span|a href=\"x\"|h2|em|section|template|select)>",
                0..400,
            ),
            max in 64usize..8192,
        ) {
            let html = opens.concat() + "marker-text";
            let (text, was_cut) = html_to_text(&html, max);
            prop_assert!(text.len() <= max);
            if !was_cut && !html.contains("<template>") && !html.contains("<select>") {
                prop_assert!(text.contains("marker-text"), "{}", text);
            }
        }

        #[test]
        fn any_bytes_decode_sniff_and_convert_without_panic(
            bytes in prop::collection::vec(any::<u8>(), 0..2048),
            max in 0usize..2048,
            charset in prop::option::of("(utf-8|iso-8859-1|us-ascii|koi8-r|)"),
        ) {
            let _ = Kind::sniff(&bytes);
            let decoded = decode(&bytes, charset.as_deref());
            let (text, _) = html_to_text(&decoded.text, max);
            prop_assert!(text.len() <= max);
            let (cut_text, was_cut) = cut(&decoded.text, max);
            prop_assert!(cut_text.len() <= max);
            prop_assert_eq!(was_cut, decoded.text.len() > max);
            prop_assert!(decoded.text.starts_with(cut_text));
        }
    }
}

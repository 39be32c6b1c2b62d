//! Editing JSON as text, so that `sfn-lock wrap` prints the reviewed
//! definition and the user's states in their own order and layout.
//!
//! serde_json (as this workspace builds it, without `preserve_order`) sorts
//! object keys: printing a parsed definition would list the states, and the
//! fields of each state, alphabetically. So the output is made by replacing
//! the byte ranges of a few values in the original texts, and build.rs
//! checks the result against the same edit done on parsed values.
//!
//! Every function here expects text that serde_json has already accepted;
//! on anything else it answers `None` rather than panic.

use std::ops::Range;

/// The byte range of the value of member `key` in the JSON object whose `{`
/// is at `object_start`. With duplicate keys, the last one (as serde_json
/// keeps it).
pub(crate) fn member_value(text: &str, object_start: usize, key: &str) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    if bytes.get(object_start) != Some(&b'{') {
        return None;
    }
    let mut found = None;
    let mut pos = skip_whitespace(bytes, object_start + 1);
    if bytes.get(pos) == Some(&b'}') {
        return None;
    }
    loop {
        let key_end = skip_string(bytes, pos)?;
        // Keys may be written with escapes; compare what they mean.
        let name: String = serde_json::from_str(text.get(pos..key_end)?).ok()?;
        pos = skip_whitespace(bytes, key_end);
        if bytes.get(pos) != Some(&b':') {
            return None;
        }
        let value_start = skip_whitespace(bytes, pos + 1);
        let value_end = skip_value(bytes, value_start)?;
        if name == key {
            found = Some(value_start..value_end);
        }
        pos = skip_whitespace(bytes, value_end);
        match bytes.get(pos) {
            Some(b',') => pos = skip_whitespace(bytes, pos + 1),
            Some(b'}') => return found,
            _ => return None,
        }
    }
}

/// The byte range to cut to remove member `key` (its first occurrence)
/// from the object whose `{` is at `object_start`: from its key through the
/// comma and space after it, so that the next member takes its place; the
/// last member goes with the comma before it instead.
pub(crate) fn member_range(text: &str, object_start: usize, key: &str) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    if bytes.get(object_start) != Some(&b'{') {
        return None;
    }
    let mut previous_end = None;
    let mut pos = skip_whitespace(bytes, object_start + 1);
    loop {
        let key_end = skip_string(bytes, pos)?;
        let name: String = serde_json::from_str(text.get(pos..key_end)?).ok()?;
        let colon = skip_whitespace(bytes, key_end);
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
        let value_end = skip_value(bytes, skip_whitespace(bytes, colon + 1))?;
        let after = skip_whitespace(bytes, value_end);
        let next = match bytes.get(after) {
            Some(b',') => Some(skip_whitespace(bytes, after + 1)),
            Some(b'}') => None,
            _ => return None,
        };
        if name == key {
            return match (next, previous_end) {
                (Some(next), _) => Some(pos..next),
                (None, Some(previous_end)) => Some(previous_end..value_end),
                // The only member: leave `{}`.
                (None, None) => Some(pos..value_end),
            };
        }
        previous_end = Some(value_end);
        pos = next?;
    }
}

/// `member_value` along a path of keys, from the top-level object.
pub(crate) fn value_at(text: &str, path: &[&str]) -> Option<Range<usize>> {
    let mut range = skip_whitespace(text.as_bytes(), 0)..text.len();
    for key in path {
        range = member_value(text, range.start, key)?;
    }
    Some(range)
}

/// How many spaces begin the line that `offset` is on.
pub(crate) fn indent_of_line(text: &str, offset: usize) -> usize {
    let line_start = text
        .get(..offset)
        .and_then(|before| before.rfind('\n'))
        .map_or(0, |newline| newline + 1);
    text.get(line_start..)
        .map_or(0, |line| line.len() - line.trim_start_matches(' ').len())
}

/// A JSON value's text moved from indentation `from` to indentation `to`:
/// every line after the first loses up to `from` leading spaces and gains
/// `to`. Safe because a JSON string cannot hold a raw line break, so every
/// line break of a value lies between its tokens.
pub(crate) fn reindent(value: &str, from: usize, to: usize) -> String {
    let pad = " ".repeat(to);
    let mut lines = value.split('\n');
    let mut out = lines.next().unwrap_or_default().to_owned();
    for line in lines {
        let spaces = line.len() - line.trim_start_matches(' ').len();
        out.push('\n');
        if !line.trim().is_empty() {
            out.push_str(&pad);
        }
        out.push_str(&line[spaces.min(from)..]);
    }
    out
}

/// `text` with each range replaced; the ranges must not overlap.
pub(crate) fn replace_ranges(text: &str, mut edits: Vec<(Range<usize>, String)>) -> Option<String> {
    // From the end, so that earlier ranges stay where they were.
    edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut out = text.to_owned();
    let mut limit = text.len();
    for (range, replacement) in edits {
        if range.end > limit || range.start > range.end {
            return None;
        }
        out.replace_range(range.clone(), &replacement);
        limit = range.start;
    }
    Some(out)
}

fn skip_whitespace(bytes: &[u8], mut pos: usize) -> usize {
    while matches!(bytes.get(pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        pos += 1;
    }
    pos
}

/// The end of the string whose `"` is at `pos`.
fn skip_string(bytes: &[u8], mut pos: usize) -> Option<usize> {
    if bytes.get(pos) != Some(&b'"') {
        return None;
    }
    pos += 1;
    loop {
        match bytes.get(pos)? {
            b'\\' => pos += 2,
            b'"' => return Some(pos + 1),
            _ => pos += 1,
        }
    }
}

/// The end of the value that starts at `pos`.
fn skip_value(bytes: &[u8], pos: usize) -> Option<usize> {
    match bytes.get(pos)? {
        b'"' => skip_string(bytes, pos),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut pos = pos;
            loop {
                match bytes.get(pos)? {
                    b'"' => {
                        pos = skip_string(bytes, pos)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(pos + 1);
                        }
                    }
                    _ => {}
                }
                pos += 1;
            }
        }
        // A number, true, false or null.
        _ => {
            let mut end = pos;
            while !matches!(
                bytes.get(end),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                end += 1;
            }
            Some(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{
  "a": {"x": "}]\"{", "y": [1, {"z": null}]},
  "St\u0061tes": {
    "One": {"Type": "Pass", "End": true}
  },
  "n": -1.5e3,
  "a": "last"
}"#;

    fn at<'t>(text: &'t str, path: &[&str]) -> &'t str {
        &text[value_at(text, path).expect("the path exists")]
    }

    #[test]
    fn finds_values_past_strings_with_brackets_and_escaped_keys() {
        assert_eq!(at(DOC, &["n"]), "-1.5e3");
        assert_eq!(
            at(DOC, &["States", "One"]),
            r#"{"Type": "Pass", "End": true}"#
        );
        // A duplicate key: the last one, as serde_json reads it.
        assert_eq!(at(DOC, &["a"]), r#""last""#);
        assert_eq!(value_at(DOC, &["missing"]), None);
        assert_eq!(value_at(DOC, &["n", "deeper"]), None);
        assert_eq!(member_value("{}", 0, "a"), None);
    }

    #[test]
    fn reindents_every_line_after_the_first() {
        let states = at(DOC, &["States"]);
        let moved = reindent(states, 2, 8);
        assert_eq!(
            moved,
            "{\n          \"One\": {\"Type\": \"Pass\", \"End\": true}\n        }"
        );
        assert_eq!(reindent("[1,\n\n2]", 0, 4), "[1,\n\n    2]");
    }

    #[test]
    fn replaces_ranges_given_in_any_order() {
        let edited = replace_ranges("abcdef", vec![(0..1, "X".into()), (4..6, "YZW".into())]);
        assert_eq!(edited.as_deref(), Some("XbcdYZW"));
        assert_eq!(
            replace_ranges("abc", vec![(0..2, String::new()), (1..3, String::new())]),
            None
        );
        assert_eq!(indent_of_line("{\n    \"k\": 1}", 8), 4);
    }

    #[test]
    fn removes_a_member_first_middle_last_or_alone() {
        let object = "{\n  \"a\": 1,\n  \"b\": {\"c\": \",\"},\n  \"d\": [2]\n}";
        let without = |key: &str| {
            let range = member_range(object, 0, key).expect("a member");
            let mut text = object.to_owned();
            text.replace_range(range, "");
            text
        };
        assert_eq!(without("a"), "{\n  \"b\": {\"c\": \",\"},\n  \"d\": [2]\n}");
        assert_eq!(without("b"), "{\n  \"a\": 1,\n  \"d\": [2]\n}");
        assert_eq!(without("d"), "{\n  \"a\": 1,\n  \"b\": {\"c\": \",\"}\n}");
        assert_eq!(member_range(object, 0, "c"), None);
        assert_eq!(member_range("{\"x\": 1}", 0, "x"), Some(1..7));
        assert_eq!(member_range("{}", 0, "x"), None);
    }
}

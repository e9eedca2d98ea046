use super::*;

/// Byte by byte: what `too_deep` must agree with, on any text.
fn reference(text: &[u8]) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0isize, false, false);
    for (i, &byte) in text.iter().enumerate() {
        let was_escaped = std::mem::replace(&mut escaped, false);
        if byte == b'\\' && !was_escaped {
            escaped = true;
        }
        if byte == b'"' && !was_escaped {
            in_string = !in_string;
        }
        if in_string {
            continue;
        }
        match byte {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH as isize {
                    return Some(i);
                }
            }
            b']' | b'}' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn nested(depth: usize, inner: &str) -> String {
    format!("{}{inner}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn the_limit_is_orjsons() {
    assert_eq!(too_deep(nested(1024, "").as_bytes()), None);
    assert_eq!(too_deep(nested(1025, "").as_bytes()), Some(1024));
    assert_eq!(too_deep(nested(200_000, "").as_bytes()), Some(1024));
    let objects = format!("{}1{}", r#"{"a":"#.repeat(1025), "}".repeat(1025));
    assert_eq!(too_deep(objects.as_bytes()), Some(5 * 1024));
    assert_eq!(column_after(nested(1025, "").as_bytes(), 1024), 1026);
    assert_eq!(column_after("[\"é\",[".as_bytes(), 6), 7);
}

#[test]
fn brackets_in_strings_do_not_count() {
    let text = format!(
        r#"["{}", "\"{}", "\\", {}]"#,
        "[".repeat(3000),
        "{".repeat(3000),
        nested(1000, "")
    );
    assert_eq!(too_deep(text.as_bytes()), None);
    assert_eq!(too_deep(text.as_bytes()), reference(text.as_bytes()));
    let deep = format!(r#"["\\\"[[", {}]"#, nested(1024, ""));
    assert_eq!(too_deep(deep.as_bytes()), reference(deep.as_bytes()));
    assert!(too_deep(deep.as_bytes()).is_some());
}

#[test]
fn an_escape_at_the_end_of_a_block_carries_into_the_next() {
    // the backslash is byte 63, the quote it escapes byte 64: the string goes on, and the
    // brackets after that quote are text
    for backslashes in [1, 2, 3] {
        let padding = 63 - backslashes;
        let text = format!(
            r#"["{}{}"{}", 1]"#,
            "a".repeat(padding - 1),
            "\\".repeat(backslashes),
            "[".repeat(2000)
        );
        assert_eq!(text.as_bytes()[63], b'\\');
        assert_eq!(too_deep(text.as_bytes()), reference(text.as_bytes()));
        // an odd count escapes the quote: the brackets are in the string
        assert_eq!(too_deep(text.as_bytes()).is_none(), backslashes % 2 == 1);
    }
}

#[test]
fn short_texts_and_unclosed_documents() {
    assert_eq!(too_deep(b"[[[["), None);
    assert_eq!(document_end(b"{}"), Some(2));
    assert_eq!(document_end(b"{\"a\": \"}\"}tail"), Some(10));
    assert_eq!(document_end(b"{\"a\": \"}"), None);
    assert_eq!(document_end(b""), None);
}

#[test]
fn documents_end_at_their_closing_bracket() {
    let first = format!(r#"{{"a": "}}", "b": [{}]}}"#, nested(3000, "\"]\""));
    let text = format!("{first} {{}}\n[1]");
    assert_eq!(document_end(text.as_bytes()), Some(first.len()));
    assert_eq!(document_end(&text.as_bytes()[first.len() + 1..]), Some(2));
    assert_eq!(document_end(b"[[]"), None);
}

#[test]
fn agrees_with_the_byte_by_byte_scan() {
    // pseudo-random texts of brackets, quotes, backslashes and letters, at every alignment
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let alphabet = br#"[[[[[[{{{]]}"\\ab"#;
    for length in [1100, 1500, 4000, 9000] {
        for _ in 0..300 {
            let text: Vec<u8> = (0..length)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            assert_eq!(too_deep(&text), reference(&text));
        }
    }
}

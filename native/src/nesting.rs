//! How deeply a JSON text nests, checked before it is parsed.
//!
//! sonic-rs skips values it is not asked to read (unknown fields, a document of the wrong type)
//! by recursion, one stack frame per level: a line of 200,000 nested arrays overflows the stack
//! and takes the process down. The Python reader (orjson) refuses a document nested deeper than
//! 1024 levels; lines deeper than that are refused here the same way, before sonic-rs sees them.
//!
//! The check runs over every line, so it looks at 64 bytes at a time: bit masks of quotes,
//! backslashes and brackets, brackets inside strings masked out, and the depth followed per block
//! (bracket by bracket only in a block that could cross the limit).

/// orjson's limit: a document may nest 1024 arrays or objects, not one more.
pub const MAX_DEPTH: usize = 1024;

/// The byte offset of the first `[` or `{` nested deeper than `MAX_DEPTH`, if there is one.
///
/// Only the brackets outside strings count. Text that is not valid JSON may be misjudged after
/// its first error, which the parser reports anyway.
pub fn too_deep(text: &[u8]) -> Option<usize> {
    if text.len() <= MAX_DEPTH {
        return None; // too short to nest that deep
    }
    let mut scan = Scan::default();
    let mut blocks = text.chunks_exact(64);
    for (index, block) in blocks.by_ref().enumerate() {
        let block: &[u8; 64] = block.try_into().expect("64 bytes");
        if let Some(offset) = scan.block(block) {
            return Some(index * 64 + offset);
        }
    }
    let rest = blocks.remainder();
    if rest.is_empty() {
        return None;
    }
    let mut last = [b' '; 64];
    last[..rest.len()].copy_from_slice(rest);
    let start = text.len() - rest.len();
    scan.block(&last).map(|offset| start + offset)
}

/// Where the array or object that `text` starts with ends: the offset just past its closing
/// bracket. None when it is not closed. Used to split documents written back to back.
pub fn document_end(text: &[u8]) -> Option<usize> {
    let mut scan = Scan::default();
    for (index, block) in text.chunks(64).enumerate() {
        let mut last = [b' '; 64];
        let block: &[u8; 64] = match block.try_into() {
            Ok(block) => block,
            Err(_) => {
                last[..block.len()].copy_from_slice(block);
                &last
            }
        };
        if let Some(offset) = scan.closing(block) {
            return Some(index * 64 + offset + 1);
        }
    }
    None
}

/// The character column (1-based, as Python counts) just after byte `offset`: where orjson says
/// its depth limit was reached.
pub fn column_after(text: &[u8], offset: usize) -> usize {
    let end = (offset + 1).min(text.len());
    // every byte but UTF-8 continuation bytes starts a character
    text[..end].iter().filter(|&&b| (b as i8) >= -0x40).count() + 1
}

#[derive(Default)]
struct Scan {
    depth: isize,
    /// All ones when the previous block ended inside a string.
    in_string: u64,
    /// The previous block ended with a backslash that escapes this block's first byte.
    escape_pending: bool,
}

/// One bit per byte of a block.
#[derive(Default)]
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

impl Scan {
    /// The block's opening and closing brackets outside strings.
    fn brackets(&mut self, block: &[u8; 64]) -> (u64, u64) {
        let masks = masks(block);
        let mut quote = masks.quote;
        if masks.backslash != 0 || self.escape_pending {
            quote &= !self.escaped(masks.backslash);
        }
        let inside = prefix_xor(quote) ^ self.in_string;
        self.in_string = ((inside as i64) >> 63) as u64;
        (masks.open & !inside, masks.close & !inside)
    }

    /// Follow one block; the offset of the bracket that closes the outermost one, if it is here.
    fn closing(&mut self, block: &[u8; 64]) -> Option<usize> {
        let (open, close) = self.brackets(block);
        let closed = close.count_ones() as isize;
        if self.depth > closed {
            self.depth += open.count_ones() as isize - closed;
            return None;
        }
        let mut brackets = open | close;
        while brackets != 0 {
            let offset = brackets.trailing_zeros() as usize;
            brackets &= brackets - 1;
            self.depth += if open & (1 << offset) != 0 { 1 } else { -1 };
            if self.depth == 0 {
                return Some(offset);
            }
        }
        None
    }

    /// Follow one block; the offset of a bracket past the limit, if one is.
    fn block(&mut self, block: &[u8; 64]) -> Option<usize> {
        let (open, close) = self.brackets(block);
        let opened = open.count_ones() as isize;
        if self.depth + opened <= MAX_DEPTH as isize {
            self.depth += opened - close.count_ones() as isize;
            return None;
        }
        let mut brackets = open | close;
        while brackets != 0 {
            let offset = brackets.trailing_zeros() as usize;
            brackets &= brackets - 1;
            if open & (1 << offset) != 0 {
                self.depth += 1;
                if self.depth > MAX_DEPTH as isize {
                    return Some(offset);
                }
            } else {
                self.depth -= 1;
            }
        }
        None
    }

    /// The bytes a backslash escapes (a quote among them does not end its string). Backslashes
    /// are rare in trace files, so they are followed one by one.
    fn escaped(&mut self, mut backslash: u64) -> u64 {
        let mut escaped = 0;
        if self.escape_pending {
            escaped = 1;
            backslash &= !1;
        }
        self.escape_pending = false;
        while backslash != 0 {
            let offset = backslash.trailing_zeros();
            backslash &= backslash - 1;
            if offset == 63 {
                self.escape_pending = true;
                break;
            }
            let next = 1u64 << (offset + 1);
            escaped |= next;
            backslash &= !next; // an escaped backslash escapes nothing
        }
        escaped
    }
}

/// Bit i set when an odd number of bits up to and including i are set in `bits`: with quote
/// bits, the bytes from an opening quote up to its closing one.
fn prefix_xor(mut bits: u64) -> u64 {
    bits ^= bits << 1;
    bits ^= bits << 2;
    bits ^= bits << 4;
    bits ^= bits << 8;
    bits ^= bits << 16;
    bits ^= bits << 32;
    bits
}

#[cfg(target_arch = "x86_64")]
fn masks(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let mut masks = Masks::default();
    // SSE2 is part of x86_64: no feature detection needed.
    unsafe {
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        // '[' | 0x20 == '{' and ']' | 0x20 == '}'; no other byte folds onto either
        let fold = _mm_set1_epi8(0x20);
        let open = _mm_set1_epi8(b'{' as i8);
        let close = _mm_set1_epi8(b'}' as i8);
        for part in 0..4 {
            let bytes = _mm_loadu_si128(block.as_ptr().add(part * 16).cast());
            let folded = _mm_or_si128(bytes, fold);
            let shift = part * 16;
            let bits = |v| u64::from(_mm_movemask_epi8(v) as u16) << shift;
            masks.quote |= bits(_mm_cmpeq_epi8(bytes, quote));
            masks.backslash |= bits(_mm_cmpeq_epi8(bytes, backslash));
            masks.open |= bits(_mm_cmpeq_epi8(folded, open));
            masks.close |= bits(_mm_cmpeq_epi8(folded, close));
        }
    }
    masks
}

#[cfg(not(target_arch = "x86_64"))]
fn masks(block: &[u8; 64]) -> Masks {
    let mut masks = Masks::default();
    for (i, &byte) in block.iter().enumerate() {
        let bit = 1u64 << i;
        match byte {
            b'"' => masks.quote |= bit,
            b'\\' => masks.backslash |= bit,
            b'[' | b'{' => masks.open |= bit,
            b']' | b'}' => masks.close |= bit,
            _ => {}
        }
    }
    masks
}

#[cfg(test)]
mod tests;

//! Reading trace files into spans grouped by trace, then linking them into trees
//! (`SpanCollector` and `link_children` in otlp.py, `_read_file` and `_filter` in sources.py).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::Arc;
use std::thread;

use crate::conventions::{self, Conventions, NO_FAMILY};
use crate::model::{is_model_call_stage, key, FastMap, Id, SpanRec};
use crate::parse::{parse_document, parse_stream, LineError, Parsed};

/// Bytes read at a time; lines of a block are parsed on every core.
const BLOCK: usize = 32 << 20;
/// Stack of a parser thread: nested values are decoded by recursion, up to the 1024 levels a
/// line may nest (a thread's default 2 MiB would do; this leaves room).
const PARSER_STACK: usize = 16 << 20;
/// Problems reported per file; more would only repeat the first ones.
pub const MAX_WARNINGS: usize = 51;

/// The spans of one trace id, and after `link` its trees (children of span `i` are
/// `children[offsets[i]..offsets[i + 1]]`, in the order the spans were read).
pub struct Group {
    pub trace_id: Id,
    pub spans: Vec<SpanRec>,
    offsets: Vec<u32>,
    children: Vec<u32>,
}

impl Group {
    pub fn span(&self, i: u32) -> &SpanRec {
        &self.spans[i as usize]
    }

    pub fn children(&self, i: u32) -> &[u32] {
        let i = i as usize;
        &self.children[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Drop repeated spans (overlapping files or query pages; the first copy stays), attach
    /// each span to its parent and return the roots: true roots and orphan subtrees.
    fn link(&mut self) -> Vec<u32> {
        let mut index: FastMap<Id, u32> =
            FastMap::with_capacity_and_hasher(self.spans.len(), Default::default());
        let mut repeated = false;
        for (i, span) in self.spans.iter().enumerate() {
            if index.contains_key(&span.span_id) {
                repeated = true;
            } else {
                index.insert(span.span_id.clone(), i as u32);
            }
        }
        if repeated {
            let mut first = 0u32..;
            let positions: Vec<bool> = self
                .spans
                .iter()
                .map(|span| index.get(&span.span_id) == first.next().as_ref())
                .collect();
            let mut keep = positions.into_iter();
            self.spans.retain(|_| keep.next().unwrap_or(false));
            index.clear();
            for (i, span) in self.spans.iter().enumerate() {
                index.insert(span.span_id.clone(), i as u32);
            }
        }
        let count = self.spans.len();
        let mut parents: Vec<Option<u32>> = Vec::with_capacity(count);
        let mut roots = Vec::new();
        for (i, span) in self.spans.iter_mut().enumerate() {
            let parent = span.parent.as_ref().and_then(|id| index.get(id).copied());
            match parent {
                Some(p) if p as usize != i => {
                    if span.end <= 0 || span.end < span.start {
                        // A child still open when its trace was exported claims no time.
                        span.end = span.start;
                    }
                    parents.push(Some(p));
                }
                _ => {
                    roots.push(i as u32);
                    parents.push(None);
                }
            }
        }
        let mut offsets = vec![0u32; count + 1];
        for p in parents.iter().flatten() {
            offsets[*p as usize + 1] += 1;
        }
        for i in 0..count {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut children = vec![0u32; offsets[count] as usize];
        for (i, parent) in parents.iter().enumerate() {
            if let Some(p) = parent {
                let slot = &mut fill[*p as usize];
                children[*slot as usize] = i as u32;
                *slot += 1;
            }
        }
        self.offsets = offsets;
        self.children = children;
        roots
    }

    /// `yield_to_wire` in otlp.py: a model call the conventions table inferred that has another
    /// model call below it is structure (its `llmtrace.stage` removed): the call is counted once,
    /// by the span closest to the wire.
    fn yield_to_wire(&mut self) {
        let calls: Vec<u32> = (0..self.spans.len() as u32)
            .filter(|&i| self.span(i).inferred_call)
            .collect();
        if calls.is_empty() {
            return;
        }
        let mut seen = vec![u32::MAX; self.spans.len()];
        for call in calls {
            seen[call as usize] = call; // a cycle of parent ids in a hostile file ends here
            let mut stack: Vec<u32> = self.children(call).to_vec();
            let mut below = false;
            while let Some(i) = stack.pop() {
                if seen[i as usize] == call {
                    continue;
                }
                seen[i as usize] = call;
                if self
                    .span(i)
                    .text(key::STAGE)
                    .is_some_and(is_model_call_stage)
                {
                    below = true;
                    break;
                }
                stack.extend_from_slice(self.children(i));
            }
            if below {
                let span = &mut self.spans[call as usize];
                span.attrs = span
                    .attrs
                    .iter()
                    .filter(|(k, _)| *k != key::STAGE)
                    .cloned()
                    .collect();
            }
        }
    }

    fn subtree_has_service(&self, root: u32, service: &str) -> bool {
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            if self.span(i).service.as_deref() == Some(service) {
                return true;
            }
            stack.extend_from_slice(self.children(i));
        }
        false
    }
}

/// A complete trace chosen for analysis: a root of a group.
#[derive(Clone, Copy)]
pub struct Selected {
    pub group: u32,
    pub root: u32,
    pub orphan: bool,
}

#[derive(Default)]
pub struct Filters<'a> {
    pub trace_id: Option<&'a str>,
    pub service: Option<&'a str>,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub limit: Option<usize>,
    /// (attribute index, value) pairs the root span must all carry as strings
    pub attributes: Vec<(u8, &'a str)>,
}

#[derive(Default)]
pub struct Store {
    pub groups: Vec<Group>,
    index: FastMap<Id, u32>,
    pub selected: Vec<Selected>,
    pub excluded_open: usize,
    /// the conventions table applied to every span read
    pub conventions: Arc<Conventions>,
    /// after `assemble`: spans per family of `conventions.family_names`, and spans unassigned
    pub families: Vec<usize>,
    pub unassigned: usize,
}

fn workers() -> usize {
    thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8)
}

impl Store {
    fn add(&mut self, parsed: Vec<Parsed>) {
        for Parsed { trace_id, span } in parsed {
            let group = match self.index.get(&trace_id) {
                Some(group) => *group as usize,
                None => {
                    self.index
                        .insert(trace_id.clone(), self.groups.len() as u32);
                    self.groups.push(Group {
                        trace_id,
                        spans: Vec::new(),
                        offsets: Vec::new(),
                        children: Vec::new(),
                    });
                    self.groups.len() - 1
                }
            };
            self.groups[group].spans.push(span);
        }
    }

    /// One answer of Jaeger's /api/v3 (OTLP JSON documents back to back, each maybe wrapped in
    /// "result"): the trace ids it holds, in the order first met, and its spans added when
    /// `keep`. Err: the answer is not OTLP trace data (all or nothing, like a whole-file JSON).
    pub fn read_answer(&mut self, data: &[u8], keep: bool) -> Result<Vec<String>, String> {
        let mut parsed = Vec::new();
        conventions::with(&self.conventions, || parse_stream(data, &mut parsed))
            .map_err(|error| error.message())?;
        let mut seen: FastMap<&Id, ()> = FastMap::default();
        let mut ids = Vec::new();
        for span in &parsed {
            if seen.insert(&span.trace_id, ()).is_none() {
                ids.push(span.trace_id.format(32));
            }
        }
        if keep {
            self.add(parsed);
        }
        Ok(ids)
    }

    /// Read one trace file (plain or gzip). Returns problems met, each with file and line.
    pub fn read_file(&mut self, path: &str, whole_document: bool) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Err(error) = self.read_path(path, whole_document, &mut warnings) {
            push_warning(&mut warnings, format!("{path}: cannot read ({error})"));
        }
        warnings
    }

    fn read_path(&mut self, path: &str, whole: bool, warnings: &mut Vec<String>) -> io::Result<()> {
        let mut file = BufReader::with_capacity(1 << 16, File::open(path)?);
        let gzip = file.fill_buf()?.starts_with(&[0x1f, 0x8b]);
        let mut reader: Box<dyn Read> = if gzip {
            Box::new(GzipMembers::new(file))
        } else {
            Box::new(file)
        };
        if whole {
            // A whole-file JSON document (pretty-printed OTLP, a saved Jaeger answer), or
            // several back to back; when it is not one, it is read line by line instead.
            let mut data = Vec::new();
            reader.read_to_end(&mut data)?;
            let mut parsed = Vec::new();
            let whole = conventions::with(&self.conventions, || parse_stream(&data, &mut parsed));
            if whole.is_ok() {
                self.add(parsed);
                return Ok(());
            }
            let mut line = 0;
            self.read_lines(&data, path, &mut line, warnings);
            return Ok(());
        }
        let mut buffer: Vec<u8> = Vec::with_capacity(BLOCK + (1 << 20));
        let mut line = 0usize;
        loop {
            // read_to_end appends into spare capacity without zeroing it first
            let n = match reader.by_ref().take(BLOCK as u64).read_to_end(&mut buffer) {
                Ok(n) => n,
                Err(error) => {
                    // A gzip file cut short: its complete lines are read, as the Python reader
                    // reads them before its decompressor gives up.
                    let cut = memchr::memrchr(b'\n', &buffer).map_or(0, |i| i + 1);
                    self.read_lines(&buffer[..cut], path, &mut line, warnings);
                    return Err(error);
                }
            };
            let eof = n < BLOCK;
            let cut = if eof {
                buffer.len()
            } else {
                match memchr::memrchr(b'\n', &buffer) {
                    Some(i) => i + 1,
                    None => continue, // one line longer than a block: read on
                }
            };
            self.read_lines(&buffer[..cut], path, &mut line, warnings);
            buffer.drain(..cut);
            if eof {
                return Ok(());
            }
        }
    }

    /// Parse the lines of `data` (numbered from `*line + 1`) on every core, then add their
    /// spans in file order.
    fn read_lines(
        &mut self,
        data: &[u8],
        name: &str,
        line: &mut usize,
        warnings: &mut Vec<String>,
    ) {
        let mut lines: Vec<(usize, &[u8])> = Vec::new();
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', data).chain(std::iter::once(data.len())) {
            if start > data.len() || (end == data.len() && start == end) {
                break;
            }
            *line += 1;
            let text = &data[start..end];
            // blank as Python's bytes.strip() sees it (vertical tab included)
            if !text
                .iter()
                .all(|b| b.is_ascii_whitespace() || *b == b'\x0b')
            {
                lines.push((*line, text));
            }
            start = end + 1;
        }
        let parts = if data.len() < (1 << 20) { 1 } else { workers() };
        let per_part = lines.len().div_ceil(parts.max(1)).max(1);
        let table = &self.conventions;
        let results: Vec<PartResult> = if parts == 1 {
            vec![conventions::with(table, || parse_lines(&lines))]
        } else {
            thread::scope(|scope| {
                let handles: Vec<_> = lines
                    .chunks(per_part)
                    .map(|part| {
                        thread::Builder::new()
                            .stack_size(PARSER_STACK)
                            .spawn_scoped(scope, move || {
                                conventions::with(table, || parse_lines(part))
                            })
                            .expect("parser thread")
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("parser thread"))
                    .collect()
            })
        };
        for (parsed, errors) in results {
            self.add(parsed);
            for (number, error) in errors {
                push_warning(warnings, format!("{name}:{number}: {}", error.message()));
            }
        }
    }

    /// Link every trace and choose the complete traces that pass the filters.
    pub fn assemble(&mut self, filters: &Filters) {
        let mut selected = Vec::new();
        self.families = vec![0; self.conventions.family_names.len()];
        self.unassigned = 0;
        for (g, group) in self.groups.iter_mut().enumerate() {
            let roots = group.link();
            group.yield_to_wire();
            // every span read once (SpanCollector counts them as it adds them)
            for span in &group.spans {
                if span.family != NO_FAMILY {
                    self.families[usize::from(span.family)] += 1;
                }
                self.unassigned += usize::from(span.unassigned);
            }
            for root in roots {
                let span = group.span(root);
                if span.end <= 0 || span.end < span.start {
                    self.excluded_open += 1;
                    continue;
                }
                selected.push(Selected {
                    group: g as u32,
                    root,
                    orphan: span.parent.is_some(),
                });
            }
        }
        if let Some(trace_id) = filters.trace_id {
            selected.retain(|s| self.groups[s.group as usize].trace_id.format(32) == trace_id);
        }
        if let Some(service) = filters.service {
            selected.retain(|s| self.groups[s.group as usize].subtree_has_service(s.root, service));
        }
        if !filters.attributes.is_empty() {
            selected.retain(|s| {
                let root = self.groups[s.group as usize].span(s.root);
                filters
                    .attributes
                    .iter()
                    .all(|(key, value)| root.text(*key) == Some(*value))
            });
        }
        let start = |s: &Selected| self.groups[s.group as usize].span(s.root).start;
        if let Some(since) = filters.since {
            selected.retain(|s| start(s) >= since);
        }
        if let Some(until) = filters.until {
            selected.retain(|s| start(s) < until);
        }
        if let Some(limit) = filters.limit {
            if selected.len() > limit {
                selected.sort_by_key(start);
                selected.drain(..selected.len() - limit);
            }
        }
        self.selected = selected;
        self.index = FastMap::default();
    }
}

/// Gzip members one after another, as Python's gzip module reads them: zero bytes between and
/// after members are padding, and a file cut short is reported in its words.
struct GzipMembers<R: BufRead> {
    member: Option<flate2::bufread::GzDecoder<R>>,
}

impl<R: BufRead> GzipMembers<R> {
    fn new(input: R) -> Self {
        GzipMembers {
            member: Some(flate2::bufread::GzDecoder::new(input)),
        }
    }
}

impl<R: BufRead> Read for GzipMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(member) = self.member.as_mut() else {
                return Ok(0);
            };
            let n = member.read(buf).map_err(|error| {
                if error.kind() == io::ErrorKind::UnexpectedEof {
                    io::Error::new(
                        error.kind(),
                        "Compressed file ended before the end-of-stream marker was reached",
                    )
                } else {
                    error
                }
            })?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // the end of a member: padding, then another member or the end of the file
            let mut input = self.member.take().expect("a member").into_inner();
            loop {
                let available = input.fill_buf()?;
                if available.is_empty() {
                    return Ok(0);
                }
                let zeros = available.iter().take_while(|&&b| b == 0).count();
                if zeros == 0 {
                    if !available.starts_with(&[0x1f])
                        || available.get(1).is_some_and(|&b| b != 0x8b)
                    {
                        let magic = python_bytes(&available[..available.len().min(2)]);
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("Not a gzipped file ({magic})"),
                        ));
                    }
                    break;
                }
                input.consume(zeros);
            }
            self.member = Some(flate2::bufread::GzDecoder::new(input));
        }
    }
}

/// Python's `repr()` of a bytes object.
fn python_bytes(bytes: &[u8]) -> String {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut out = format!("b{quote}");
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b if char::from(b) == quote => {
                out.push('\\');
                out.push(quote);
            }
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push(quote);
    out
}

/// The spans of some lines, and the problems met, by line number.
type PartResult = (Vec<Parsed>, Vec<(usize, LineError)>);

fn parse_lines(lines: &[(usize, &[u8])]) -> PartResult {
    let bytes: usize = lines.iter().map(|(_, text)| text.len()).sum();
    let mut parsed = Vec::with_capacity(bytes / 256 + 16);
    let mut errors = Vec::new();
    for (number, text) in lines {
        if let Err(error) = parse_document(text, &mut parsed) {
            if errors.len() < MAX_WARNINGS {
                errors.push((*number, error));
            }
        }
    }
    (parsed, errors)
}

fn push_warning(warnings: &mut Vec<String>, message: String) {
    if warnings.len() < MAX_WARNINGS {
        warnings.push(message);
    }
}

#[cfg(test)]
mod tests;

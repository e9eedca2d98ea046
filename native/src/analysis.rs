//! The per-trace breakdown and the facts advice cites: the rules of
//! `llmtrace/analysis/breakdown.py` and `evidence.py`, step for step, so that a report built from
//! these results is the report the Python code builds (tests/analysis/test_native.py compares
//! the two on the same files). Change both together.
//!
//! One module past 800 lines on purpose: it follows `breakdown.py` and `evidence.py` section by
//! section (the walk, a model call's phases, the facts), so a rule and its Python twin are found
//! at the same place; split, each would need a map to the other.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{
    is_model_call_stage, key, seconds_between, stage_index, Value, GENERATION, KIND_CLIENT,
    KIND_CONSUMER, KIND_PRODUCER, KIND_SERVER, LOAD, NANOS, NETWORK, OTHER, QUEUE, RETRY, TTFT,
};
use crate::store::Group;

/// Python's `max(a, b)`: `a` unless `b` is greater (so NaN behaves as it does there).
fn py_max(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// Python's `min(a, b)`: `a` unless `b` is smaller.
fn py_min(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

/// Python's `x or default` for an optional float.
fn or_else(value: Option<f64>, default: f64) -> f64 {
    match value {
        Some(v) if v != 0.0 => v,
        _ => default,
    }
}

pub struct Segment {
    pub stage: u8,
    pub start: i64,
    pub end: i64,
    pub span: u32,
}

#[derive(Clone, Copy)]
pub struct Phases {
    pub network: f64,
    pub queue: f64,
    pub ttft: f64,
    pub generation: f64,
    pub server_joined: bool,
    /// Model loading the server reported (Ollama's load_duration): taken out of ttft.
    pub load: f64,
    /// Refused attempts and the waits before trying again (`llmtrace.retry.time`): the call's
    /// first stretch.
    pub retry: f64,
}

struct ServerTimings {
    queue: f64,
    time_to_first_token: Option<f64>,
    end_to_end: Option<f64>,
    load: f64,
}

/// A span with children being walked: its children by end time, latest first, and how far
/// back its stretch is explained. `placed`, when the span or a child is on another clock than
/// the root (`breakdown.remote_shift`): each child's (start, end, shift) on the root's clock.
struct Frame {
    span: u32,
    low: i64,
    stage: u8,
    ordered: Vec<u32>,
    next: usize,
    cursor: i64,
    high: i64,
    placed: Option<Vec<(i64, i64, i128)>>,
}

impl Frame {
    /// Span `span` entered on [low, high), its children not looked at yet.
    fn new(
        span: u32,
        low: i64,
        high: i64,
        stage: u8,
        ordered: Vec<u32>,
        placed: Option<Vec<(i64, i64, i128)>>,
    ) -> Frame {
        Frame {
            span,
            low,
            stage,
            ordered,
            next: 0,
            cursor: high,
            high,
            placed,
        }
    }
}

/// A time moved by a shift, kept within 64 bits (only a hostile file's times get near the ends).
fn shifted(time: i64, shift: i128) -> i64 {
    (i128::from(time) + shift).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

fn is_remote_kind(kind: u8) -> bool {
    kind == KIND_SERVER || kind == KIND_CONSUMER
}

fn is_caller_kind(kind: u8) -> bool {
    kind == KIND_CLIENT || kind == KIND_PRODUCER
}

enum Declared {
    Unset,
    Model,
    Stage(u8),
}

const MODEL_OPERATIONS: [&str; 3] = ["chat", "text_completion", "generate_content"];

/// A sibling covering at least this fraction of a stage-less leaf is what the leaf wraps
/// (`breakdown.WRAPPED_NUMERATOR / WRAPPED_DENOMINATOR`, compared in integers as there).
const WRAPPED_NUMERATOR: i128 = 9;
const WRAPPED_DENOMINATOR: i128 = 10;

impl Group {
    fn declared(&self, i: u32) -> Declared {
        match self.span(i).get(key::STAGE) {
            None => Declared::Unset,
            Some(Value::Str(stage)) if is_model_call_stage(stage) => Declared::Model,
            Some(Value::Str(stage)) => Declared::Stage(stage_index(stage).unwrap_or(OTHER)),
            Some(_) => Declared::Stage(OTHER),
        }
    }

    fn is_unstaged_model_call(&self, i: u32) -> bool {
        let span = self.span(i);
        let operation = span.get(key::OPERATION_NAME).and_then(Value::as_str);
        operation.is_some_and(|op| MODEL_OPERATIONS.contains(&op))
            && (span.has(key::TIME_TO_FIRST_TOKEN) || span.has(key::TIME_TO_FIRST_CHUNK))
    }

    /// `breakdown.claims_no_stage`: the span's own time would be `other` or its parent's.
    fn claims_no_stage(&self, i: u32) -> bool {
        match self.declared(i) {
            Declared::Unset => !self.is_unstaged_model_call(i),
            Declared::Model => false,
            Declared::Stage(stage) => stage == OTHER,
        }
    }

    /// `breakdown.is_remote`: span `i` is another process's record of its caller's request.
    fn is_remote(&self, i: u32, parent: u32) -> bool {
        let (span, parent) = (self.span(i), self.span(parent));
        is_remote_kind(span.kind)
            && (is_caller_kind(parent.kind) || span.service.as_deref() != parent.service.as_deref())
    }

    /// `breakdown.remote_shift`: what places remote span `i` centred in its caller's span
    /// [caller_start, caller_end) on the root's clock, by durations alone.
    fn remote_shift(&self, i: u32, caller_start: i64, caller_end: i64) -> i128 {
        let span = self.span(i);
        let room = (i128::from(caller_end) - i128::from(caller_start))
            - (i128::from(span.end) - i128::from(span.start));
        i128::from(caller_start) + room.div_euclid(2) - i128::from(span.start)
    }

    /// `breakdown.wrapped_by_sibling`: one of `siblings` (ending no later than the leaf, latest
    /// first) covers at least nine tenths of the leaf's stretch [start, end), the part of the
    /// leaf before `cursor`, and has a stage or spans under it. `placed`: the siblings' times on
    /// the walk's clock, when they were moved there.
    fn wrapped_by_sibling(
        &self,
        siblings: &[u32],
        placed: Option<&[(i64, i64, i128)]>,
        start: i64,
        end: i64,
        cursor: i64,
    ) -> bool {
        let length = i128::from(end) - i128::from(start);
        for (n, &sibling) in siblings.iter().enumerate() {
            let span = self.span(sibling);
            let (sibling_start, sibling_end) = match placed {
                Some(placed) => (placed[n].0, placed[n].1),
                None => (span.start, span.end),
            };
            let sibling_end = sibling_end.min(cursor);
            if (i128::from(sibling_end) - i128::from(start)) * WRAPPED_DENOMINATOR
                < length * WRAPPED_NUMERATOR
            {
                return false; // this sibling and the earlier-ending rest cover too little
            }
            if sibling_start >= cursor {
                continue; // after the stretch explained so far, as the walk skips it
            }
            if self.children(sibling).is_empty() && self.claims_no_stage(sibling) {
                continue;
            }
            let covered = i128::from(sibling_end.min(end)) - i128::from(sibling_start.max(start));
            if covered * WRAPPED_DENOMINATOR >= length * WRAPPED_NUMERATOR {
                return true;
            }
        }
        false
    }

    pub fn is_model_call(&self, i: u32) -> bool {
        match self.span(i).get(key::STAGE) {
            Some(stage) => stage.as_str().is_some_and(is_model_call_stage),
            None => self.is_unstaged_model_call(i),
        }
    }

    /// `breakdown.failed_attempt`: a model call that failed, or a span that failed directly
    /// over one.
    fn failed_attempt(&self, i: u32) -> bool {
        if !self.span(i).has(key::ERROR_TYPE) {
            return false;
        }
        self.is_model_call(i)
            || self
                .children(i)
                .iter()
                .any(|&child| self.span(child).has(key::ERROR_TYPE) && self.is_model_call(child))
    }

    fn first_token_time(&self, i: u32) -> Option<f64> {
        let span = self.span(i);
        span.seconds(key::TIME_TO_FIRST_TOKEN)
            .or_else(|| span.seconds(key::TIME_TO_FIRST_CHUNK))
    }

    fn find_server_span(&self, i: u32) -> Option<u32> {
        let mut stack: Vec<u32> = self.children(i).to_vec();
        while let Some(child) = stack.pop() {
            if self.span(child).kind == KIND_SERVER {
                return Some(child);
            }
            stack.extend_from_slice(self.children(child));
        }
        None
    }

    fn queue_spans(&self, server: u32) -> (f64, bool) {
        let mut total = 0.0;
        let mut has_proxy_span = false;
        let mut stack: Vec<u32> = self.children(server).to_vec();
        while let Some(i) = stack.pop() {
            let span = self.span(i);
            if span.get(key::STAGE).and_then(Value::as_str) == Some("queue") {
                total += py_max(span.duration(), 0.0);
                has_proxy_span = has_proxy_span
                    || span.get(key::QUEUE_NAME).and_then(Value::as_str) == Some("proxy");
            } else {
                stack.extend_from_slice(self.children(i));
            }
        }
        (total, has_proxy_span)
    }

    fn server_timings(&self, i: u32) -> Option<ServerTimings> {
        if let Some(server) = self.find_server_span(i) {
            let span = self.span(server);
            if span.has(key::LATENCY_TIME_IN_QUEUE) || span.has(key::LATENCY_E2E) {
                // vLLM's llm_request span
                return Some(ServerTimings {
                    queue: or_else(span.seconds(key::LATENCY_TIME_IN_QUEUE), 0.0),
                    time_to_first_token: span.seconds(key::LATENCY_TIME_TO_FIRST_TOKEN),
                    end_to_end: Some(or_else(span.seconds(key::LATENCY_E2E), span.duration())),
                    load: 0.0,
                });
            }
            let (queued, has_proxy_span) = self.queue_spans(server);
            let proxy_queue = or_else(span.seconds(key::SERVER_PROXY_QUEUE_TIME), 0.0);
            let server_ttft = span
                .seconds(key::SERVER_TIME_TO_FIRST_TOKEN)
                .or_else(|| span.seconds(key::TIME_TO_FIRST_TOKEN));
            return Some(ServerTimings {
                queue: queued + if has_proxy_span { 0.0 } else { proxy_queue },
                time_to_first_token: server_ttft,
                end_to_end: (span.end > span.start).then(|| span.duration()),
                load: 0.0,
            });
        }
        // Timings the server reported in its response (TGI headers, llama.cpp body timings).
        let span = self.span(i);
        let queue = span.seconds(key::SERVER_QUEUE_TIME);
        let prompt = span.seconds(key::SERVER_PROMPT_TIME);
        let generation = span.seconds(key::SERVER_GENERATION_TIME);
        let inference = span.seconds(key::SERVER_INFERENCE_TIME);
        let mut first_token = span.seconds(key::SERVER_TIME_TO_FIRST_TOKEN);
        let mut total = span.seconds(key::SERVER_PROCESSING_TIME);
        // A model load (Ollama) comes before the prompt is evaluated, within the first-token wait.
        let load = span.seconds(key::SERVER_LOAD_TIME);
        if first_token.is_none() {
            // The server's whole time less its generation (Ollama): its wait for the first
            // token, with what its named parts leave out (waiting for a free slot, templating).
            if let (Some(total), Some(generation)) = (total, generation) {
                first_token = Some(total - generation);
            }
        }
        if first_token.is_none() {
            if let Some(prompt) = prompt {
                first_token = Some(or_else(queue, 0.0) + or_else(load, 0.0) + prompt);
            }
        }
        if total.is_none() {
            if let (Some(a), Some(b)) = (first_token, generation) {
                total = Some(0.0 + a + b);
            }
        }
        if total.is_none() {
            if let Some(inference) = inference {
                total = Some(or_else(queue, 0.0) + inference);
            }
        }
        if queue.is_none() && first_token.is_none() && total.is_none() && load.is_none() {
            return None;
        }
        Some(ServerTimings {
            queue: or_else(queue, 0.0),
            time_to_first_token: first_token,
            end_to_end: total,
            load: or_else(load, 0.0),
        })
    }

    fn transport_time(&self, i: u32) -> f64 {
        let span = self.span(i);
        let mut total = 0.0;
        for name in [key::HTTP_CONNECT, key::HTTP_TLS, key::HTTP_REQUEST_SENT] {
            if let Some(value) = span.seconds(name) {
                if value > 0.0 {
                    total += value;
                }
            }
        }
        total
    }

    pub fn model_phases(&self, i: u32) -> Phases {
        let span = self.span(i);
        let duration = py_max(span.duration(), 0.0);
        let mut client_first = self
            .first_token_time(i)
            .map(|v| py_min(py_max(v, 0.0), duration));
        let server = self.server_timings(i);
        let mut network: Option<f64> = None;
        let mut queue = 0.0;
        let mut load = 0.0;
        if let Some(server) = &server {
            queue = server.queue;
            load = server.load;
            if let (Some(first), Some(server_first)) = (client_first, server.time_to_first_token) {
                network = Some(first - server_first);
            } else if let Some(e2e) = server.end_to_end {
                network = Some(duration - e2e);
            }
            if client_first.is_none() {
                if let (Some(server_first), Some(e2e)) =
                    (server.time_to_first_token, server.end_to_end)
                {
                    let decode = py_max(e2e - server_first, 0.0);
                    client_first = Some(py_max(duration - decode, 0.0));
                }
            }
        }
        let first = client_first.unwrap_or(duration);
        let retry = match span.seconds(key::RETRY_TIME) {
            Some(value) if value != 0.0 => py_min(py_max(value, 0.0), first),
            _ => 0.0,
        };
        // The server's timings are its answer's, the last attempt's: what the client waited
        // beyond them includes the refused attempts and the waits, which are retry.
        let network = match network {
            Some(network) => network - retry,
            None => self.transport_time(i),
        };
        let network = py_min(py_max(network, 0.0), first - retry);
        let queue = py_min(py_max(queue, 0.0), first - retry - network);
        let load = py_min(py_max(load, 0.0), first - retry - network - queue);
        Phases {
            network,
            queue,
            ttft: first - retry - network - queue - load,
            generation: duration - first,
            server_joined: server.is_some(),
            load,
            retry,
        }
    }

    fn emit_model_call(&self, i: u32, low: i64, high: i64, shift: i128, out: &mut Vec<Segment>) {
        let phases = self.model_phases(i);
        let span = self.span(i);
        // in 128 bits: a phase of a span of a hostile file may run past 64-bit nanoseconds,
        // where Python's integers go on
        let mut boundary = i128::from(span.start) + shift;
        for (stage, seconds) in [
            (RETRY, phases.retry),
            (NETWORK, phases.network),
            (QUEUE, phases.queue),
            (LOAD, phases.load),
            (TTFT, phases.ttft),
            (GENERATION, phases.generation),
        ] {
            let phase_start = boundary;
            boundary = if stage == GENERATION {
                i128::from(span.end) + shift
            } else {
                boundary + (seconds * NANOS).round_ties_even() as i128
            };
            let start = phase_start.max(i128::from(low));
            let end = boundary.min(i128::from(high));
            if end > start {
                // both within [low, high]
                out.push(Segment {
                    stage,
                    start: start as i64,
                    end: end as i64,
                    span: i,
                });
            }
        }
    }

    /// Enter span `i` on the stretch [low, high) of the critical path: a model call or a leaf
    /// is emitted at once, a span with children becomes a frame to walk. `shift` places the
    /// span's times on the root's clock; `remote`: the span is another process's.
    #[allow(clippy::too_many_arguments)]
    fn enter(
        &self,
        i: u32,
        low: i64,
        high: i64,
        inherited: u8,
        shift: i128,
        remote: bool,
        out: &mut Vec<Segment>,
    ) -> Option<Frame> {
        let declared = self.declared(i);
        let unset = matches!(declared, Declared::Unset);
        let mut stage = match declared {
            Declared::Unset => {
                if self.is_unstaged_model_call(i) {
                    self.emit_model_call(i, low, high, shift, out);
                    return None;
                }
                inherited
            }
            Declared::Model => {
                // The client's own measurements divide the call; children (HTTP spans, the
                // server's span on another clock) are already accounted for by them.
                self.emit_model_call(i, low, high, shift, out);
                return None;
            }
            Declared::Stage(stage) => stage,
        };
        if remote && stage == NETWORK {
            stage = OTHER; // a server's time is never its caller's network
        }
        let children = self.children(i);
        if children.is_empty() {
            out.push(Segment {
                stage,
                start: low,
                end: high,
                span: i,
            });
            return None;
        }
        let has_remote = children
            .iter()
            .any(|&child| is_remote_kind(self.span(child).kind) && self.is_remote(child, i));
        if !has_remote && shift == 0 {
            // one clock for the span and its children (most spans)
            let mut ordered: Vec<u32> = children.to_vec();
            if ordered.len() > 1 {
                ordered.sort_by_key(|child| std::cmp::Reverse(self.span(*child).end));
            }
            return Some(Frame::new(i, low, high, stage, ordered, None));
        }
        if has_remote && unset && is_caller_kind(self.span(i).kind) {
            stage = NETWORK; // a hop: the caller's wait outside the server's span
        }
        Some(self.placed_frame(i, low, high, stage, shift))
    }

    /// `breakdown._placed_frame`: the children placed on the root's clock, by `shift` as the
    /// span is or by their own `remote_shift`, ordered by their placed end, latest first.
    fn placed_frame(&self, i: u32, low: i64, high: i64, stage: u8, shift: i128) -> Frame {
        let span = self.span(i);
        let (caller_start, caller_end) = (shifted(span.start, shift), shifted(span.end, shift));
        let mut rows: Vec<(u32, (i64, i64, i128))> = self
            .children(i)
            .iter()
            .map(|&child| {
                let child_shift =
                    if is_remote_kind(self.span(child).kind) && self.is_remote(child, i) {
                        self.remote_shift(child, caller_start, caller_end)
                    } else {
                        shift
                    };
                let rec = self.span(child);
                let placed = (
                    shifted(rec.start, child_shift),
                    shifted(rec.end, child_shift),
                    child_shift,
                );
                (child, placed)
            })
            .collect();
        rows.sort_by_key(|(_, placed)| std::cmp::Reverse(placed.1));
        let (ordered, placed) = rows.into_iter().unzip();
        Frame::new(i, low, high, stage, ordered, Some(placed))
    }

    /// `_walk_critical_path` without recursion (span trees can be deeper than a thread's stack):
    /// walking back from the end, the child that finished last is what the parent waited for;
    /// time no such child covers is the parent's own.
    fn walk(&self, root: u32, low: i64, high: i64, out: &mut Vec<Segment>) {
        let mut stack: Vec<Frame> = Vec::new();
        stack.extend(self.enter(root, low, high, OTHER, 0, false, out));
        while let Some(frame) = stack.last_mut() {
            let mut descend = None;
            while frame.next < frame.ordered.len() && frame.cursor > frame.low {
                let child = frame.ordered[frame.next];
                let span = self.span(child);
                let (start, end, shift) = match &frame.placed {
                    Some(placed) => placed[frame.next],
                    None => (span.start, span.end, 0),
                };
                frame.next += 1;
                if start >= frame.cursor {
                    continue; // entirely after the stretch already explained: concurrent work
                }
                let child_end = end.min(frame.cursor);
                if child_end <= frame.low {
                    frame.next = frame.ordered.len();
                    break;
                }
                let child_start = start.max(frame.low);
                if child_end <= child_start {
                    continue;
                }
                if self.children(child).is_empty()
                    && self.claims_no_stage(child)
                    && self.wrapped_by_sibling(
                        &frame.ordered[frame.next..],
                        frame.placed.as_deref().map(|placed| &placed[frame.next..]),
                        child_start,
                        child_end,
                        frame.cursor,
                    )
                {
                    continue; // structure beside the work it wraps: passed over for that work
                }
                if frame.cursor < frame.high && self.failed_attempt(child) {
                    // Superseded: the attempt and the wait after it, until the sibling already
                    // on the path, were lost to a retry or a fallback.
                    out.push(Segment {
                        stage: RETRY,
                        start: child_start,
                        end: frame.cursor,
                        span: child,
                    });
                    frame.cursor = child_start;
                    continue;
                }
                if child_end < frame.cursor {
                    out.push(Segment {
                        stage: frame.stage,
                        start: child_end,
                        end: frame.cursor,
                        span: frame.span,
                    });
                }
                frame.cursor = child_start;
                let remote = is_remote_kind(span.kind) && self.is_remote(child, frame.span);
                descend = Some((child, child_start, child_end, frame.stage, shift, remote));
                break;
            }
            match descend {
                Some((child, start, end, stage, shift, remote)) => {
                    stack.extend(self.enter(child, start, end, stage, shift, remote, out))
                }
                None => {
                    if frame.cursor > frame.low {
                        out.push(Segment {
                            stage: frame.stage,
                            start: frame.low,
                            end: frame.cursor,
                            span: frame.span,
                        });
                    }
                    stack.pop();
                }
            }
        }
    }

    /// The root's duration as consecutive stage segments along the critical path, in time order.
    pub fn critical_path(&self, root: u32) -> Vec<Segment> {
        let span = self.span(root);
        let mut out = Vec::new();
        if span.end > span.start {
            self.walk(root, span.start, span.end, &mut out);
        }
        out.sort_by_key(|segment| segment.start);
        out
    }
}

/// What a trace's root says about the benchmark run it belongs to.
#[derive(Default)]
pub struct RootFacts {
    pub bench_run: Option<String>,
    pub concurrency: Option<i64>,
    pub question_set: Option<String>,
    pub warmup: bool,
}

pub fn root_facts(group: &Group, root: u32) -> RootFacts {
    let span = group.span(root);
    if !span.has(key::BENCH_RUN) && !span.has(key::BENCH_WARMUP) {
        return RootFacts::default();
    }
    let run = span
        .get(key::BENCH_RUN)
        .filter(|v| !matches!(v, Value::None));
    let question_set = span
        .get(key::BENCH_QUESTION_SET_HASH)
        .filter(|v| v.truthy());
    RootFacts {
        bench_run: run.map(Value::py_str),
        concurrency: span.get(key::BENCH_CONCURRENCY).and_then(Value::count),
        question_set: question_set.map(Value::py_str),
        warmup: matches!(span.get(key::BENCH_WARMUP), Some(Value::Bool(true))),
    }
}

/// One model call as the client saw it (`evidence.ModelCall`).
pub struct ModelCall {
    pub model: String,
    pub duration: f64,
    pub time_to_first_token: Option<f64>,
    pub generation_time: Option<f64>,
    pub output_tokens_per_second: Option<f64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub streamed: Option<bool>,
    pub queue: f64,
    pub network: f64,
    pub server_joined: bool,
    pub connect: Option<f64>,
    pub finish_reasons: Vec<String>,
    pub max_tokens: Option<i64>,
    pub input_hash: Option<i64>,
    pub retry: f64,
    pub retry_error_types: Vec<String>,
}

fn model_call(group: &Group, i: u32) -> ModelCall {
    let span = group.span(i);
    let duration = py_max(span.duration(), 0.0);
    let ttft = group.first_token_time(i);
    let mut generation = span.seconds(key::GENERATION_TIME);
    if generation.is_none() {
        if let Some(first) = ttft {
            generation = Some(py_max(duration - first, 0.0));
        }
    }
    let output_tokens = span.get(key::OUTPUT_TOKENS).and_then(Value::count);
    let mut speed = span.seconds(key::OUTPUT_TOKENS_PER_SECOND);
    if speed.is_none() {
        if let (Some(tokens), Some(seconds)) = (output_tokens, generation) {
            if tokens != 0 && seconds != 0.0 {
                speed = Some(tokens as f64 / seconds);
            }
        }
    }
    let phases = group.model_phases(i);
    let model = span
        .get(key::RESPONSE_MODEL)
        .filter(|v| v.truthy())
        .or_else(|| span.get(key::REQUEST_MODEL))
        .filter(|v| v.truthy());
    let streamed = match span.get(key::REQUEST_STREAM) {
        Some(Value::Bool(flag)) => Some(*flag),
        _ => ttft.map(|_| true),
    };
    let finish_reasons = match span.get(key::FINISH_REASONS) {
        Some(Value::List(items)) => items.iter().map(Value::py_str).collect(),
        _ => Vec::new(),
    };
    let retry_error_types = match span.get(key::RETRY_ERROR_TYPES) {
        Some(Value::List(items)) => items.iter().map(Value::py_str).collect(),
        _ => Vec::new(),
    };
    let input_hash = match span.get(key::INPUT_MESSAGES) {
        Some(Value::Int(hash)) => Some(*hash),
        Some(Value::Bool(flag)) => Some(i64::from(*flag)),
        _ => None,
    };
    ModelCall {
        model: model
            .map(Value::py_str)
            .unwrap_or_else(|| "unknown".to_string()),
        duration,
        time_to_first_token: ttft,
        generation_time: generation,
        output_tokens_per_second: speed,
        input_tokens: span.get(key::INPUT_TOKENS).and_then(Value::count),
        output_tokens,
        streamed,
        queue: phases.queue,
        network: phases.network,
        server_joined: phases.server_joined,
        connect: span.seconds(key::HTTP_CONNECT),
        finish_reasons,
        max_tokens: span.get(key::REQUEST_MAX_TOKENS).and_then(Value::count),
        input_hash,
        retry: phases.retry,
        retry_error_types,
    }
}

/// Facts gathered across traces (`evidence.FactSink`), in the order the Python walk finds them.
#[derive(Default)]
pub struct Sink {
    pub model_calls: Vec<ModelCall>,
    pub retrieval_returned: Vec<i64>,
    pub retrieval_top_k: Vec<i64>,
    pub retrieval_query_hashes: Vec<i64>,
    pub rerank_inputs: Vec<i64>,
    pub embedding_inputs: Vec<i64>,
    pub prompt_chars: Vec<i64>,
    pub tool_durations: Vec<(String, Vec<f64>)>,
    /// `FactSink.superseded_errors`
    pub superseded_errors: Vec<String>,
    tool_index: HashMap<String, usize>,
}

/// Size attributes by the stage whose spans carry them (`FactSink._by_stage`).
const SIZES: [(&str, u8); 5] = [
    ("retrieval", key::RETRIEVAL_RETURNED),
    ("retrieval", key::RETRIEVAL_TOP_K),
    ("rerank", key::RERANK_INPUT_COUNT),
    ("embedding", key::EMBEDDING_INPUT_COUNT),
    ("prompt", key::PROMPT_CHARS),
];

impl Sink {
    fn bucket(&mut self, name: u8) -> &mut Vec<i64> {
        match name {
            key::RETRIEVAL_RETURNED => &mut self.retrieval_returned,
            key::RETRIEVAL_TOP_K => &mut self.retrieval_top_k,
            key::RERANK_INPUT_COUNT => &mut self.rerank_inputs,
            key::EMBEDDING_INPUT_COUNT => &mut self.embedding_inputs,
            _ => &mut self.prompt_chars,
        }
    }

    pub fn add_trace(&mut self, group: &Group, root: u32) {
        let mut failed: Vec<u32> = Vec::new();
        let mut answered_from: Option<i64> = None; // when the last answered model call began
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            stack.extend_from_slice(group.children(i));
            let span = group.span(i);
            if span.attrs.is_empty() {
                continue;
            }
            if group.is_model_call(i) {
                self.model_calls.push(model_call(group, i));
                if span.has(key::ERROR_TYPE) {
                    failed.push(i);
                } else if answered_from.is_none_or(|from| span.start > from) {
                    answered_from = Some(span.start);
                }
                continue;
            }
            let stage = span.get(key::STAGE);
            for (owner, name) in SIZES {
                let applies = match stage {
                    None => true,
                    Some(Value::Str(s)) => &**s == owner,
                    Some(_) => false,
                };
                if applies {
                    if let Some(count) = span.get(name).and_then(Value::count) {
                        self.bucket(name).push(count);
                    }
                }
            }
            let stage_name = stage.map(|v| v.as_str());
            match stage_name {
                None | Some(Some("retrieval")) => {
                    if let Some(Value::Int(hash)) = span.get(key::RETRIEVAL_QUERY_TEXT) {
                        self.retrieval_query_hashes.push(*hash);
                    }
                }
                Some(Some("tool")) => {
                    let tool = match span.get(key::TOOL_NAME).filter(|v| v.truthy()) {
                        Some(value) => value.py_str(),
                        None => span.name.to_string(),
                    };
                    let duration = py_max(span.duration(), 0.0);
                    let index = match self.tool_index.get(&tool) {
                        Some(index) => *index,
                        None => {
                            self.tool_index
                                .insert(tool.clone(), self.tool_durations.len());
                            self.tool_durations.push((tool, Vec::new()));
                            self.tool_durations.len() - 1
                        }
                    };
                    self.tool_durations[index].1.push(duration);
                }
                _ => {}
            }
        }
        if let Some(from) = answered_from {
            for i in failed {
                let span = group.span(i);
                if span.end <= from {
                    if let Some(error) = span.get(key::ERROR_TYPE) {
                        self.superseded_errors.push(error.py_str());
                    }
                }
            }
        }
    }
}

/// One analysed trace: its position among the selected traces, duration and stage seconds.
pub struct TraceRow {
    pub selected: usize,
    pub duration: f64,
    pub stages: Vec<(u8, f64)>,
    /// seconds of the critical path per (service, stage), in the order first met
    pub services: Vec<(Option<Arc<str>>, u8, f64)>,
    pub facts: RootFacts,
    pub client: ClientTimes,
}

/// When a bench client first saw the trace's streamed answer, as its root records
/// (as `collect.TraceList.collect` reads it): first body byte, first SSE event, in seconds.
pub struct ClientTimes {
    pub first_byte: Option<f64>,
    pub first_event: Option<f64>,
}

pub fn client_times(group: &Group, root: u32) -> ClientTimes {
    let span = group.span(root);
    ClientTimes {
        first_byte: span.seconds(key::CLIENT_TIME_TO_FIRST_BYTE),
        first_event: span.seconds(key::CLIENT_TIME_TO_FIRST_EVENT),
    }
}

/// Everything `report._collect` gathers, for every selected trace of one run.
#[derive(Default)]
pub struct Collected {
    pub rows: Vec<TraceRow>,
    pub sink: Sink,
    pub unclaimed: Vec<(String, f64)>,
    pub excluded_warmup: usize,
}

pub fn collect<'a>(
    traces: impl Iterator<Item = (usize, &'a Group, u32)>,
    run: Option<&str>,
) -> Collected {
    let mut result = Collected::default();
    let mut unclaimed_index: HashMap<String, usize> = HashMap::new();
    for (selected, group, root) in traces {
        let facts = root_facts(group, root);
        if facts.warmup {
            result.excluded_warmup += 1;
            continue;
        }
        if let Some(run) = run {
            if facts.bench_run.as_deref() != Some(run) {
                continue;
            }
        }
        let mut stages: Vec<(u8, f64)> = Vec::with_capacity(8);
        let mut services: Vec<(Option<Arc<str>>, u8, f64)> = Vec::new();
        for segment in group.critical_path(root) {
            let seconds = seconds_between(segment.start, segment.end);
            match stages.iter_mut().find(|(stage, _)| *stage == segment.stage) {
                Some(entry) => entry.1 += seconds,
                None => stages.push((segment.stage, 0.0 + seconds)),
            }
            let service = &group.span(segment.span).service;
            match services
                .iter_mut()
                .find(|(s, stage, _)| *stage == segment.stage && s.as_deref() == service.as_deref())
            {
                Some(entry) => entry.2 += seconds,
                None => services.push((service.clone(), segment.stage, 0.0 + seconds)),
            }
            if segment.stage == OTHER {
                let name = &group.span(segment.span).name;
                match unclaimed_index.get(&**name) {
                    Some(index) => result.unclaimed[*index].1 += seconds,
                    None => {
                        unclaimed_index.insert(name.to_string(), result.unclaimed.len());
                        result.unclaimed.push((name.to_string(), 0.0 + seconds));
                    }
                }
            }
        }
        result.sink.add_trace(group, root);
        result.rows.push(TraceRow {
            selected,
            duration: group.span(root).duration(),
            stages,
            services,
            facts,
            client: client_times(group, root),
        });
    }
    result
}

#[cfg(test)]
mod tests;

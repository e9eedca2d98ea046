//! `llmtrace_native`: the file reader and per-trace analysis of `llmtrace report`, for trace files
//! too large for the pure-Python path (about a million spans and more).
//!
//! Python keeps everything else (sources, statistics, advice, rendering), and stays the
//! reference: `llmtrace.analysis.native` uses this module when it is installed, and the tests
//! build the same report both ways and compare them.

mod analysis;
mod model;
mod nesting;
mod parse;
mod store;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::analysis::{collect, Collected};
use crate::model::{Value, STAGES};
use crate::store::{Filters, Store};

/// Spans read from trace files, grouped by trace; `assemble` links them into trees.
#[pyclass(module = "llmtrace_native")]
struct TraceStore {
    store: Store,
}

/// (kept trace indices among `selected()`, durations, [(stage, seconds per trace)],
/// (bench run, concurrency, question set hash) per trace, orphans, earliest start, latest end)
type TracesOut = (
    Vec<usize>,
    Vec<f64>,
    Vec<(&'static str, Vec<f64>)>,
    (Vec<Option<String>>, Vec<Option<i64>>, Vec<Option<String>>),
    usize,
    Option<i64>,
    Option<i64>,
);
type SinkOut<'py> = (Bound<'py, PyList>, Vec<Vec<i64>>, Vec<(String, Vec<f64>)>);
/// (traces, sink, unclaimed seconds by span name, warm-up traces left out)
type CollectOut<'py> = (TracesOut, SinkOut<'py>, Vec<(String, f64)>, usize);

#[pymethods]
impl TraceStore {
    #[new]
    fn new() -> Self {
        TraceStore {
            store: Store::default(),
        }
    }

    /// Read one trace file (OTLP JSON lines, or a whole JSON document when `whole_document`),
    /// plain or gzip. Returns the problems met: "FILE:LINE: ..." or "FILE: cannot read (...)".
    fn read_file(&mut self, py: Python<'_>, path: &str, whole_document: bool) -> Vec<String> {
        let store = &mut self.store;
        py.detach(|| store.read_file(path, whole_document))
    }

    /// Link spans into trees and choose the complete traces passing the filters (times in unix
    /// nanoseconds). Returns how many traces were chosen.
    #[pyo3(signature = (trace_id=None, service=None, since=None, until=None, limit=None))]
    fn assemble(
        &mut self,
        py: Python<'_>,
        trace_id: Option<&str>,
        service: Option<&str>,
        since: Option<i64>,
        until: Option<i64>,
        limit: Option<usize>,
    ) -> usize {
        let store = &mut self.store;
        let filters = Filters {
            trace_id,
            service,
            since,
            until,
            limit,
        };
        py.detach(|| store.assemble(&filters));
        self.store.selected.len()
    }

    #[getter]
    fn excluded_open(&self) -> usize {
        self.store.excluded_open
    }

    /// The chosen traces: (trace id, root span id, orphan, root name).
    fn selected(&self) -> Vec<(String, String, bool, String)> {
        self.store
            .selected
            .iter()
            .map(|s| {
                let group = &self.store.groups[s.group as usize];
                let root = group.span(s.root);
                (
                    group.trace_id.format(32),
                    root.span_id.format(16),
                    s.orphan,
                    root.name.to_string(),
                )
            })
            .collect()
    }

    /// Breakdown and facts of the chosen traces (warm-up requests left out, only `run`'s when
    /// given), as columns aligned by trace: (traces, sink, unclaimed, excluded_warmup).
    #[pyo3(signature = (run=None))]
    fn collect<'py>(&self, py: Python<'py>, run: Option<&str>) -> PyResult<CollectOut<'py>> {
        let store = &self.store;
        let collected: Collected = py.detach(|| {
            let traces = store
                .selected
                .iter()
                .enumerate()
                .map(|(i, s)| (i, &store.groups[s.group as usize], s.root));
            collect(traces, run)
        });
        let count = collected.rows.len();
        let mut present = [false; STAGES.len()];
        for row in &collected.rows {
            for (stage, seconds) in &row.stages {
                if *seconds > 0.0 {
                    present[*stage as usize] = true;
                }
            }
        }
        let mut columns: Vec<(&'static str, Vec<f64>)> = Vec::new();
        let mut column_of = [usize::MAX; STAGES.len()];
        for (stage, name) in STAGES.iter().enumerate() {
            if present[stage] {
                column_of[stage] = columns.len();
                columns.push((name, vec![0.0; count]));
            }
        }
        let mut chosen = Vec::with_capacity(count);
        let mut durations = Vec::with_capacity(count);
        let (mut runs, mut concurrency, mut question_sets) = (Vec::new(), Vec::new(), Vec::new());
        let (mut orphans, mut started, mut ended) = (0, None::<i64>, None::<i64>);
        for (t, row) in collected.rows.into_iter().enumerate() {
            for (stage, seconds) in row.stages {
                if let Some(column) = columns.get_mut(column_of[stage as usize]) {
                    column.1[t] = seconds;
                }
            }
            let selected = &store.selected[row.selected];
            let root = store.groups[selected.group as usize].span(selected.root);
            orphans += usize::from(selected.orphan);
            started = Some(started.map_or(root.start, |s| s.min(root.start)));
            ended = Some(ended.map_or(root.end, |e| e.max(root.end)));
            chosen.push(row.selected);
            durations.push(row.duration);
            runs.push(row.facts.bench_run);
            concurrency.push(row.facts.concurrency);
            question_sets.push(row.facts.question_set);
        }
        let traces = (
            chosen,
            durations,
            columns,
            (runs, concurrency, question_sets),
            orphans,
            started,
            ended,
        );
        let sink = collected.sink;
        // One flat tuple per call, in the field order of evidence.ModelCall.
        let calls = PyList::empty(py);
        for c in sink.model_calls {
            let fields: [Bound<'py, PyAny>; 15] = [
                c.model.into_pyobject(py)?.into_any(),
                c.duration.into_pyobject(py)?.into_any(),
                c.time_to_first_token.into_pyobject(py)?.into_any(),
                c.generation_time.into_pyobject(py)?.into_any(),
                c.output_tokens_per_second.into_pyobject(py)?.into_any(),
                c.input_tokens.into_pyobject(py)?.into_any(),
                c.output_tokens.into_pyobject(py)?.into_any(),
                c.streamed.into_pyobject(py)?.into_any(),
                c.queue.into_pyobject(py)?.into_any(),
                c.network.into_pyobject(py)?.into_any(),
                c.server_joined.into_pyobject(py)?.to_owned().into_any(),
                c.connect.into_pyobject(py)?.into_any(),
                c.finish_reasons.into_pyobject(py)?.into_any(),
                c.max_tokens.into_pyobject(py)?.into_any(),
                c.input_hash.into_pyobject(py)?.into_any(),
            ];
            calls.append(PyTuple::new(py, fields)?)?;
        }
        let sizes = vec![
            sink.retrieval_returned,
            sink.retrieval_top_k,
            sink.retrieval_query_hashes,
            sink.rerank_inputs,
            sink.embedding_inputs,
            sink.prompt_chars,
        ];
        Ok((
            traces,
            (calls, sizes, sink.tool_durations),
            collected.unclaimed,
            collected.excluded_warmup,
        ))
    }

    /// Every span of the `index`-th chosen trace's trace id, in reading order:
    /// (span id, parent id, name, kind, start, end, attributes, service).
    fn trace_spans<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Bound<'py, PyList>> {
        let selected = self
            .store
            .selected
            .get(index)
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err("no such trace"))?;
        let group = &self.store.groups[selected.group as usize];
        let out = PyList::empty(py);
        for span in &group.spans {
            let attributes = PyDict::new(py);
            for (key, value) in span.attrs.iter() {
                attributes.set_item(model::KEYS[*key as usize], to_python(py, value)?)?;
            }
            out.append((
                span.span_id.format(16),
                span.parent.as_ref().map(|id| id.format(16)),
                &*span.name,
                span.kind,
                span.start,
                span.end,
                attributes,
                span.service.as_deref(),
            ))?;
        }
        Ok(out)
    }
}

fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::None => py.None().into_bound(py),
        Value::Str(s) => (&**s).into_pyobject(py)?.into_any(),
        Value::Int(v) => v.into_pyobject(py)?.into_any(),
        Value::Float(v) => v.into_pyobject(py)?.into_any(),
        Value::Bool(v) => v.into_pyobject(py)?.to_owned().into_any(),
        Value::List(items) => {
            let list = PyList::empty(py);
            for item in items.iter() {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Value::Map(items) => {
            let dict = PyDict::new(py);
            for (key, item) in items.iter() {
                dict.set_item(&**key, to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

#[pymodule]
fn llmtrace_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TraceStore>()?;
    m.add("ATTRIBUTES", model::KEYS.to_vec())?;
    m.add("STAGES", STAGES.to_vec())?;
    Ok(())
}

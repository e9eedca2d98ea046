//! `llmtrace._native`: the file reader and per-trace analysis of `llmtrace report`, for trace files
//! too large for the pure-Python path (about a million spans and more).
//!
//! Python keeps everything else (sources, statistics, advice, rendering), and stays the
//! reference: `llmtrace.analysis.native` uses this module when it is installed, and the tests
//! build the same report both ways and compare them.

mod analysis;
mod conventions;
mod line_error;
mod model;
mod nesting;
mod parse;
mod store;
#[cfg(test)]
mod testing;
mod values;

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::analysis::{collect, Collected};
use crate::model::{Value, STAGES};
use crate::store::{Filters, Store};

/// Spans read from trace files, grouped by trace; `assemble` links them into trees.
#[pyclass(module = "llmtrace._native")]
struct TraceStore {
    store: Store,
}

/// One chosen trace, as the report names it.
#[pyclass(module = "llmtrace._native", frozen, get_all)]
struct SelectedTrace {
    trace_id: String,
    root_span_id: String,
    orphan: bool,
    root_name: String,
}

/// Breakdown and facts of the chosen traces, as columns aligned by trace
/// (`llmtrace.analysis.collect.TraceColumns` is what Python makes of it).
#[pyclass(module = "llmtrace._native", frozen, get_all)]
struct Columns {
    /// index among `selected()` of each kept trace
    chosen: Vec<usize>,
    durations: Vec<f64>,
    /// (stage, seconds per trace) for the stages with any time, in vocabulary order
    stages: Vec<(&'static str, Vec<f64>)>,
    bench_runs: Vec<Option<String>>,
    concurrency: Vec<Option<i64>>,
    question_sets: Vec<Option<String>>,
    orphans: usize,
    started: Option<i64>,
    ended: Option<i64>,
    /// one flat tuple per model call, its fields in the order of `MODEL_CALL_FIELDS`
    model_calls: Py<PyList>,
    retrieval_returned: Vec<i64>,
    retrieval_top_k: Vec<i64>,
    retrieval_query_hashes: Vec<i64>,
    rerank_inputs: Vec<i64>,
    embedding_inputs: Vec<i64>,
    prompt_chars: Vec<i64>,
    tool_durations: Vec<(String, Vec<f64>)>,
    /// error types of the model calls a later call of their request answered after
    superseded_errors: Vec<String>,
    /// "other" seconds by span name
    unclaimed: Vec<(String, f64)>,
    excluded_warmup: usize,
    /// when the bench client first saw each trace's streamed answer: its first body byte and
    /// first SSE event (None: not recorded on the root)
    first_bytes: Vec<Option<f64>>,
    first_events: Vec<Option<f64>>,
    /// the `group_by` attribute of each trace's root (None: not a string, or absent)
    groups: Option<Vec<Option<String>>>,
    /// (service, stage, seconds per trace) for each service's stages with any time on the
    /// critical path (service None: the span's resource named none)
    services: Vec<(Option<String>, &'static str, Vec<f64>)>,
}

/// One span of a trace, with the fields of `llmtrace.analysis.model.Span`.
#[pyclass(module = "llmtrace._native", frozen, get_all)]
struct SpanRecord {
    span_id: String,
    parent_id: Option<String>,
    name: String,
    kind: i64,
    start: i64,
    end: i64,
    attributes: Py<PyDict>,
    service: Option<String>,
}

/// The fields of a model call tuple, in order: checked against `evidence.ModelCall` by the tests.
const MODEL_CALL_FIELDS: [&str; 17] = [
    "model",
    "duration",
    "time_to_first_token",
    "generation_time",
    "output_tokens_per_second",
    "input_tokens",
    "output_tokens",
    "streamed",
    "queue",
    "network",
    "server_joined",
    "connect",
    "finish_reasons",
    "max_tokens",
    "input_hash",
    "retry",
    "retry_error_types",
];

#[pymethods]
impl TraceStore {
    /// `conventions`: the table of `llmtrace.analysis.conventions` (`native_table()`), applied
    /// to every span read; without it spans are read as they are.
    #[new]
    #[pyo3(signature = (conventions=None))]
    fn new(conventions: Option<conventions::Table>) -> PyResult<Self> {
        let mut store = Store::default();
        if let Some(table) = conventions {
            let table = conventions::Conventions::new(table)
                .map_err(pyo3::exceptions::PyValueError::new_err)?;
            store.conventions = std::sync::Arc::new(table);
        }
        Ok(TraceStore { store })
    }

    /// After `assemble`: spans per recognised instrumentation family (those with any), and how
    /// many spans no stage was found for.
    fn recognised(&self) -> (Vec<(String, usize)>, usize) {
        let names = &self.store.conventions.family_names;
        let families = names
            .iter()
            .zip(&self.store.families)
            .filter(|(_, count)| **count > 0)
            .map(|(name, count)| (name.to_string(), *count))
            .collect();
        (families, self.store.unassigned)
    }

    /// Read one trace file (OTLP JSON lines, or a whole JSON document when `whole_document`),
    /// plain or gzip. Returns the problems met: "FILE:LINE: ..." or "FILE: cannot read (...)".
    fn read_file(&mut self, py: Python<'_>, path: &str, whole_document: bool) -> Vec<String> {
        let store = &mut self.store;
        py.detach(|| store.read_file(path, whole_document))
    }

    /// One answer of Jaeger's /api/v3: the trace ids it holds (hex), its spans kept when `keep`.
    /// Raises ValueError when it is not OTLP trace data.
    fn read_answer(&mut self, py: Python<'_>, data: Vec<u8>, keep: bool) -> PyResult<Vec<String>> {
        let store = &mut self.store;
        py.detach(|| store.read_answer(&data, keep))
            .map_err(pyo3::exceptions::PyValueError::new_err)
    }

    /// Link spans into trees and choose the complete traces passing the filters (times in unix
    /// nanoseconds). Returns how many traces were chosen.
    /// `attributes` keeps the traces whose root span carries each (key, value) as a string.
    #[pyo3(signature = (trace_id=None, service=None, since=None, until=None, limit=None, attributes=Vec::new()))]
    #[allow(
        clippy::too_many_arguments,
        reason = "the keyword arguments of the Python method"
    )]
    fn assemble(
        &mut self,
        py: Python<'_>,
        trace_id: Option<&str>,
        service: Option<&str>,
        since: Option<i64>,
        until: Option<i64>,
        limit: Option<usize>,
        attributes: Vec<(String, String)>,
    ) -> PyResult<usize> {
        let mut by_index = Vec::with_capacity(attributes.len());
        for (key, value) in &attributes {
            by_index.push((root_key(key)?, value.as_str()));
        }
        let store = &mut self.store;
        let filters = Filters {
            trace_id,
            service,
            since,
            until,
            limit,
            attributes: by_index,
        };
        py.detach(|| store.assemble(&filters));
        Ok(self.store.selected.len())
    }

    #[getter]
    fn excluded_open(&self) -> usize {
        self.store.excluded_open
    }

    /// The chosen traces.
    fn selected(&self) -> Vec<SelectedTrace> {
        self.store
            .selected
            .iter()
            .map(|s| {
                let group = &self.store.groups[s.group as usize];
                let root = group.span(s.root);
                SelectedTrace {
                    trace_id: group.trace_id.format(32),
                    root_span_id: root.span_id.format(16),
                    orphan: s.orphan,
                    root_name: root.name.to_string(),
                }
            })
            .collect()
    }

    /// Breakdown and facts of the chosen traces (warm-up requests left out, only `run`'s when
    /// given), as columns aligned by trace.
    /// `group_by` names a root attribute whose string value is returned per trace (`groups`).
    #[pyo3(signature = (run=None, group_by=None))]
    fn collect(
        &self,
        py: Python<'_>,
        run: Option<&str>,
        group_by: Option<&str>,
    ) -> PyResult<Columns> {
        let group_key = group_by.map(root_key).transpose()?;
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
        let mut groups = Vec::new();
        let (mut first_bytes, mut first_events) = (Vec::new(), Vec::new());
        let mut services: Vec<(Option<String>, &'static str, Vec<f64>)> = Vec::new();
        let mut service_of: HashMap<(Option<Arc<str>>, u8), usize> = HashMap::new();
        for (t, row) in collected.rows.into_iter().enumerate() {
            for (stage, seconds) in row.stages {
                if let Some(column) = columns.get_mut(column_of[stage as usize]) {
                    column.1[t] = seconds;
                }
            }
            for (service, stage, seconds) in row.services {
                if seconds <= 0.0 {
                    continue;
                }
                let index = *service_of
                    .entry((service.clone(), stage))
                    .or_insert_with(|| {
                        let name = service.as_deref().map(str::to_string);
                        services.push((name, STAGES[stage as usize], vec![0.0; count]));
                        services.len() - 1
                    });
                services[index].2[t] = seconds;
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
            first_bytes.push(row.client.first_byte);
            first_events.push(row.client.first_event);
            if let Some(key) = group_key {
                groups.push(root.text(key).map(str::to_string));
            }
        }
        let sink = collected.sink;
        // One flat tuple per call (MODEL_CALL_FIELDS): a hundred thousand of them are handed
        // over at a time, and Python makes each a NamedTuple without looking at names.
        let calls = PyList::empty(py);
        for c in sink.model_calls {
            let fields: [Bound<'_, PyAny>; 17] = [
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
                c.retry.into_pyobject(py)?.into_any(),
                c.retry_error_types.into_pyobject(py)?.into_any(),
            ];
            calls.append(PyTuple::new(py, fields)?)?;
        }
        Ok(Columns {
            chosen,
            durations,
            stages: columns,
            bench_runs: runs,
            concurrency,
            question_sets,
            orphans,
            started,
            ended,
            model_calls: calls.unbind(),
            retrieval_returned: sink.retrieval_returned,
            retrieval_top_k: sink.retrieval_top_k,
            retrieval_query_hashes: sink.retrieval_query_hashes,
            rerank_inputs: sink.rerank_inputs,
            embedding_inputs: sink.embedding_inputs,
            prompt_chars: sink.prompt_chars,
            tool_durations: sink.tool_durations,
            superseded_errors: sink.superseded_errors,
            unclaimed: collected.unclaimed,
            excluded_warmup: collected.excluded_warmup,
            first_bytes,
            first_events,
            groups: group_key.map(|_| groups),
            services,
        })
    }

    /// Every span of the `index`-th chosen trace's trace id, in reading order.
    fn trace_spans(&self, py: Python<'_>, index: usize) -> PyResult<Vec<SpanRecord>> {
        let selected = self
            .store
            .selected
            .get(index)
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err("no such trace"))?;
        let group = &self.store.groups[selected.group as usize];
        let mut out = Vec::with_capacity(group.spans.len());
        for span in &group.spans {
            let attributes = PyDict::new(py);
            for (key, value) in span.attrs.iter() {
                attributes.set_item(model::KEYS[*key as usize], to_python(py, value)?)?;
            }
            out.push(SpanRecord {
                span_id: span.span_id.format(16),
                parent_id: span.parent.as_ref().map(|id| id.format(16)),
                name: span.name.to_string(),
                kind: span.kind.into(),
                start: span.start,
                end: span.end,
                attributes: attributes.unbind(),
                service: span.service.as_deref().map(str::to_string),
            });
        }
        Ok(out)
    }
}

/// The index of a root attribute traces can be filtered and grouped by.
fn root_key(name: &str) -> PyResult<u8> {
    match model::attribute_index(name) {
        Some(key) => Ok(key),
        None => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "attribute {name:?} is not read from trace files"
        ))),
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

// Built into the llmtrace package as `llmtrace._native` (pyproject.toml, setuptools-rust).
#[pymodule(name = "_native")]
fn llmtrace_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TraceStore>()?;
    m.add_class::<SelectedTrace>()?;
    m.add_class::<Columns>()?;
    m.add_class::<SpanRecord>()?;
    m.add("MODEL_CALL_FIELDS", MODEL_CALL_FIELDS.to_vec())?;
    m.add("ATTRIBUTES", model::KEYS.to_vec())?;
    m.add("STAGES", STAGES.to_vec())?;
    m.add("MODEL_CALL_STAGES", model::MODEL_CALL_STAGES.to_vec())?;
    Ok(())
}

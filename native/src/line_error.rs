//! Why a line (or document) of a trace file is not read: not JSON, or JSON that is not OTLP trace
//! data, in the words both readers use.

/// Why one line (or document) produced no spans, or only those before the problem.
#[derive(Debug)]
pub enum LineError {
    Json(String),
    Otlp(String),
}

impl LineError {
    pub(crate) fn detail(&self) -> String {
        match self {
            LineError::Json(detail) | LineError::Otlp(detail) => detail.clone(),
        }
    }

    pub fn message(&self) -> String {
        match self {
            LineError::Json(detail) => format!("not valid JSON ({detail})"),
            LineError::Otlp(detail) => format!("not OTLP trace data ({detail})"),
        }
    }
}

pub(crate) fn classify(error: sonic_rs::Error) -> LineError {
    // The first line: the rest is a multi-line excerpt of the input.
    let text = error.to_string();
    let detail = text
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string();
    match error.classify() {
        sonic_rs::error::Category::TypeUnmatched | sonic_rs::error::Category::NotFound => {
            LineError::Otlp(detail)
        }
        _ => LineError::Json(detail),
    }
}

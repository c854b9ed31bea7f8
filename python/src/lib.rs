//! The extension module `flashlab._flashlab`: starts one of flashlab's commands on a thread
//! of its own ([`flashlab::api::run`]) and hands Python its JSON and its recordings as
//! column buffers, which `flashlab/__init__.py` turns into Arrow tables. Python waits for a
//! call in short steps with the GIL released, so Ctrl-C reaches Python between them and
//! cancels that call's own token (nothing process-wide: no signal handler is installed).

use flashlab::api::{self, Cancel, Column, Error, Output, Want};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

/// A command running on its own thread.
#[pyclass]
struct Call {
    cancel: Cancel,
    done: Mutex<Option<Receiver<Result<Output, Error>>>>,
    result: Mutex<Option<Result<Output, Error>>>,
}

/// Starts `argv` (`["sim", "--preset", "mx500", ...]`), recording the figures over time
/// and histograms if `series`, every request if `requests`.
#[pyfunction]
fn start(argv: Vec<String>, series: bool, requests: bool) -> PyResult<Call> {
    let cancel = Cancel::new();
    let token = cancel.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("flashlab-call".into())
        .spawn(move || {
            let want = Want { series, requests };
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                api::run(&argv, want, &token)
            }))
            .unwrap_or_else(|_| {
                Err(Error::Failed(
                    "flashlab panicked (a bug: please report it with the call's arguments)".into(),
                ))
            });
            let _ = tx.send(out);
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    Ok(Call {
        cancel,
        done: Mutex::new(Some(rx)),
        result: Mutex::new(None),
    })
}

#[pymethods]
impl Call {
    /// Waits up to `timeout_s` seconds (for ever if None) with the GIL released; whether
    /// the call has ended.
    #[pyo3(signature = (timeout_s=None))]
    fn wait(&self, py: Python<'_>, timeout_s: Option<f64>) -> bool {
        py.detach(|| {
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            let Some(rx) = done.as_ref() else {
                return true;
            };
            let got = match timeout_s {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(s) => rx.recv_timeout(Duration::from_secs_f64(s.max(0.0))),
            };
            let out = match got {
                Ok(out) => out,
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => Err(Error::Failed(
                    "the call's thread ended without a result".into(),
                )),
            };
            *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
            *done = None;
            true
        })
    }

    /// Asks the call to stop: it stops at its next check, removes what it made and ends
    /// with a "cancelled" error.
    fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The ended call's outcome: ("ok", json text, tables) or (kind, message, None) with
    /// kind "usage", "failed" or "cancelled". A table is a list of (name, kind, data,
    /// extra) columns: ("u64", bytes, None), ("f64", bytes, validity bytes), ("text",
    /// u32 code bytes, names).
    fn outcome<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let taken = self.result.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(out) = taken else {
            return Err(PyRuntimeError::new_err(
                "the call has not ended (wait for it first), or its outcome was taken",
            ));
        };
        match out {
            Ok(o) => {
                let json = serde_json::to_string(&o.json)
                    .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
                let tables = PyDict::new(py);
                for (name, t) in &o.tables {
                    let cols = PyList::empty(py);
                    for (cname, c) in &t.columns {
                        cols.append(column(py, cname, c)?)?;
                    }
                    tables.set_item(name, cols)?;
                }
                Ok(("ok", json, tables).into_pyobject(py)?.into_any())
            }
            Err(e) => {
                let kind = match e {
                    Error::Usage(_) => "usage",
                    Error::Failed(_) => "failed",
                    Error::Cancelled(_) => "cancelled",
                };
                Ok((kind, e.to_string(), py.None())
                    .into_pyobject(py)?
                    .into_any())
            }
        }
    }
}

/// Little-endian bytes of `values`.
fn le_bytes<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * N);
    for &v in values {
        out.extend_from_slice(&to(v));
    }
    out
}

/// Arrow's validity bitmap (bit i of byte i/8, least significant first).
fn bitmap(valid: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; valid.len().div_ceil(8)];
    for (i, &v) in valid.iter().enumerate() {
        if v {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

fn column<'py>(py: Python<'py>, name: &str, c: &Column) -> PyResult<Bound<'py, PyAny>> {
    let t = match c {
        Column::U64(v) => (
            name,
            "u64",
            PyBytes::new(py, &le_bytes(v, u64::to_le_bytes)).into_any(),
            py.None().into_bound(py),
        ),
        Column::F64 { values, valid } => (
            name,
            "f64",
            PyBytes::new(py, &le_bytes(values, f64::to_le_bytes)).into_any(),
            PyBytes::new(py, &bitmap(valid)).into_any(),
        ),
        Column::Text { codes, names } => (
            name,
            "text",
            PyBytes::new(py, &le_bytes(codes, u32::to_le_bytes)).into_any(),
            PyList::new(py, names)?.into_any(),
        ),
    };
    Ok(t.into_pyobject(py)?.into_any())
}

/// The arguments of `command` from named values given as JSON pairs, in order
/// (`[["queue_depth", 32]]`): [`flashlab::api::argv`], which spells them as the command
/// line does. (true, arguments, "") or (false, [], why not).
#[pyfunction]
fn argv(command: &str, named_json: &str) -> PyResult<(bool, Vec<String>, String)> {
    let named: Vec<(String, serde_json::Value)> = serde_json::from_str(named_json)
        .map_err(|e| PyRuntimeError::new_err(format!("options as JSON: {e}")))?;
    match api::argv(command, &named) {
        Ok(a) => Ok((true, a, String::new())),
        Err(e) => Ok((false, Vec::new(), e.to_string())),
    }
}

/// The command line's help for `command` (its options, defaults and what they do):
/// (true, text) or (false, why not).
#[pyfunction]
fn help(command: &str) -> (bool, String) {
    match api::help(command) {
        Ok(t) => (true, t),
        Err(e) => (false, e.to_string()),
    }
}

#[pymodule]
fn _flashlab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Call>()?;
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(argv, m)?)?;
    m.add_function(wrap_pyfunction!(help, m)?)?;
    m.add("COMMANDS", api::COMMANDS.to_vec())?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

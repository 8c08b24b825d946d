//! `Lane`: the service's fast lane (`crate::lane`) for Python. The loop runs with the GIL released and
//! takes it for each batch of requests it hands to `answer` and each connection it gives to `hand_off`.

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::lane::{Host, Lane as Loop, Limits, Remote, Reply, Request};

/// Sent when `answer` raises (it is written not to): the error is printed, the connections closed.
const FAILED: &[u8] =
    b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain; charset=utf-8\r\n\
content-length: 21\r\nconnection: close\r\n\r\nInternal Server Error";

#[pyclass(frozen, module = "simhash_redis_native")]
pub struct Lane {
    idle: Mutex<Option<Loop>>,
    remote: Arc<Remote>,
    answer: Py<PyAny>,
    hand_off: Py<PyAny>,
    limits: Limits,
}

#[pymethods]
impl Lane {
    #[new]
    fn new(
        answer: Py<PyAny>,
        hand_off: Py<PyAny>,
        keep_alive: f64,
        max_body: usize,
        streamed: Vec<Vec<u8>>,
    ) -> PyResult<Self> {
        let keep_alive = Duration::try_from_secs_f64(keep_alive).map_err(|_| {
            PyValueError::new_err(format!("keep_alive must be seconds >= 0, got {keep_alive}"))
        })?;
        let lane = Loop::new()?;
        let remote = lane.remote();
        Ok(Lane {
            idle: Mutex::new(Some(lane)),
            remote,
            answer,
            hand_off,
            limits: Limits {
                keep_alive,
                max_body,
                streamed: streamed
                    .iter()
                    .map(|kind| kind.to_ascii_lowercase())
                    .collect(),
            },
        })
    }

    /// Take a connected socket's file descriptor (the lane owns it from now on).
    fn adopt(&self, fd: RawFd) -> PyResult<()> {
        if fd < 0 {
            return Err(PyValueError::new_err(format!(
                "not a file descriptor: {fd}"
            )));
        }
        // SAFETY: the caller gives up a descriptor it opened for the lane (a dup of an accepted socket)
        // and never uses or closes it again; the lane is its one owner.
        #[allow(unsafe_code)]
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(self.remote.adopt(owned)?)
    }

    /// Stop: no more connections; the requests read are answered, then `run` returns.
    fn stop(&self) -> PyResult<()> {
        Ok(self.remote.stop()?)
    }

    /// Serve the connections given, on this thread, until stopped (once per lane).
    fn run(&self, py: Python<'_>) -> PyResult<()> {
        let Some(lane) = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Err(PyValueError::new_err("the lane has run already"));
        };
        let mut host = PyHost {
            answer: &self.answer,
            hand_off: &self.hand_off,
        };
        let limits = &self.limits;
        Ok(py.detach(|| lane.run(&mut host, limits))?)
    }
}

struct PyHost<'a> {
    answer: &'a Py<PyAny>,
    hand_off: &'a Py<PyAny>,
}

fn address(py: Python<'_>, address: Option<std::net::SocketAddr>) -> PyResult<Bound<'_, PyAny>> {
    match address {
        Some(a) => Ok(PyTuple::new(
            py,
            [
                a.ip().to_string().into_pyobject(py)?.into_any(),
                a.port().into_pyobject(py)?.into_any(),
            ],
        )?
        .into_any()),
        None => Ok(py.None().into_bound(py)),
    }
}

impl PyHost<'_> {
    fn call(&self, py: Python<'_>, requests: &[Request<'_>]) -> PyResult<Vec<Reply>> {
        let batch = PyList::empty(py);
        for request in requests {
            let headers = PyList::empty(py);
            for (name, value) in &request.headers {
                headers.append((PyBytes::new(py, name), PyBytes::new(py, value)))?;
            }
            batch.append((
                request.method,
                PyBytes::new(py, request.target),
                headers,
                PyBytes::new(py, request.body),
                address(py, request.client)?,
                address(py, request.server)?,
                request.keep_alive,
            ))?;
        }
        let replies = self.answer.bind(py).call1((batch,))?;
        let mut out = Vec::with_capacity(requests.len());
        for reply in replies.try_iter()? {
            let reply = reply?;
            if reply.is_none() {
                out.push(Reply::HandOff);
            } else {
                let (response, keep_alive): (Bound<'_, PyBytes>, bool) = reply.extract()?;
                out.push(Reply::Answer(response.as_bytes().to_vec(), keep_alive));
            }
        }
        if out.len() != requests.len() {
            return Err(PyValueError::new_err(
                "the lane's answer must give one reply a request",
            ));
        }
        Ok(out)
    }
}

impl Host for PyHost<'_> {
    fn answer(&mut self, requests: &[Request<'_>]) -> Vec<Reply> {
        Python::attach(|py| {
            self.call(py, requests).unwrap_or_else(|err| {
                err.print(py);
                requests
                    .iter()
                    .map(|_| Reply::Answer(FAILED.to_vec(), false))
                    .collect()
            })
        })
    }

    fn hand_off(&mut self, connection: OwnedFd, read: Vec<u8>) {
        Python::attach(|py| {
            let fd = connection.into_raw_fd(); // owned by the callee from here on
            if let Err(err) = self.hand_off.bind(py).call1((fd, PyBytes::new(py, &read))) {
                err.print(py);
            }
        })
    }
}

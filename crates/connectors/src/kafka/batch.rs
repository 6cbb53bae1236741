//! Batch consumption: up to a few thousand messages per call into librdkafka.
//!
//! `rdkafka`'s `BaseConsumer::poll` returns one message per call, and each call costs two or
//! three clock reads, a queue lock, an event object and an `Arc` (about a third of the
//! source's time when it reads into a discarding sink). librdkafka's
//! `rd_kafka_consume_batch_queue` takes many messages off a queue under one poll, but the
//! crate does not wrap it, so this module does, for the one queue the reader owns:
//!
//! * [`BatchQueue::new`] makes a queue of the consumer's own (`rd_kafka_queue_new`), and
//!   [`BatchQueue::forward`] forwards a partition's fetch queue to it once the partition is
//!   assigned. Only fetched messages and per-partition errors arrive there; events (errors of
//!   the client, offset-commit results, statistics) stay on the consumer's queue, which the
//!   reader still polls with `BaseConsumer::poll`, once per call, *before* this queue: a
//!   message fetched between an assignment and its forwarding lands there, and is older than
//!   every message of its partition on this queue.
//! * [`BatchQueue::consume`] returns a [`Batch`] that owns the messages and destroys them
//!   when dropped; [`RawMessage`] reads a message's fields as borrowed slices.
//!
//! # Safety
//!
//! Every `unsafe` call here is an FFI call into librdkafka on pointers it gave out:
//!
//! * the queue handle is created from the consumer's `rd_kafka_t` and destroyed in `Drop`;
//!   the reader declares its `BatchQueue` before its `BaseConsumer`, so the queue is destroyed
//!   before the client (fields drop in declaration order);
//! * a [`Batch`] holds messages that `rd_kafka_consume_batch_queue` returned; it is created and
//!   dropped inside one `poll` of the reader (so before the client goes), each message is
//!   destroyed once, and a [`RawMessage`] and the slices it hands out borrow the batch, so
//!   they cannot outlive the message.
#![allow(unsafe_code)]

use std::ffi::{c_void, CStr, CString};
use std::ptr;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// A queue of the consumer's own that its assigned partitions are forwarded to.
pub(super) struct BatchQueue {
    queue: *mut rd::rd_kafka_queue_t,
    rk: *mut rd::rd_kafka_t,
    /// The array `rd_kafka_consume_batch_queue` fills, kept between calls.
    buf: Vec<*mut rd::rd_kafka_message_t>,
}

impl BatchQueue {
    /// A new, empty queue of `consumer`'s client.
    pub(super) fn new(consumer: &BaseConsumer) -> Option<BatchQueue> {
        let rk = consumer.client().native_ptr();
        // SAFETY: `rk` is the live client of `consumer`; the queue is destroyed in `Drop`,
        // before the client (see the module's safety notes).
        let queue = unsafe { rd::rd_kafka_queue_new(rk) };
        (!queue.is_null()).then(|| BatchQueue {
            queue,
            rk,
            buf: Vec::new(),
        })
    }

    /// Forwards the fetch queue of `topic`'s `partition` here. Done after every assignment
    /// that includes the partition: un-assigning it ends the forwarding.
    pub(super) fn forward(&self, topic: &str, partition: i32) {
        let Ok(topic) = CString::new(topic) else {
            return; // A topic name with a NUL byte cannot be assigned in the first place.
        };
        // SAFETY: `rk` and `queue` are live (see `new`); the partition queue handle is
        // destroyed right after (the forwarding belongs to the partition, not to the handle).
        unsafe {
            let partition_queue =
                rd::rd_kafka_queue_get_partition(self.rk, topic.as_ptr(), partition);
            if !partition_queue.is_null() {
                rd::rd_kafka_queue_forward(partition_queue, self.queue);
                rd::rd_kafka_queue_destroy(partition_queue);
            }
        }
    }

    /// Takes up to `max` messages off the queue without waiting.
    pub(super) fn consume(&mut self, max: usize) -> Batch {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.resize(max.max(1), ptr::null_mut());
        // SAFETY: `queue` is live; librdkafka writes at most `buf.len()` pointers into `buf`
        // and returns how many, or -1 on error (no messages then).
        let n =
            unsafe { rd::rd_kafka_consume_batch_queue(self.queue, 0, buf.as_mut_ptr(), buf.len()) };
        buf.truncate(usize::try_from(n).unwrap_or(0));
        Batch { messages: buf }
    }

    /// Gives a batch's array back for the next call (the messages are destroyed first).
    pub(super) fn recycle(&mut self, batch: Batch) {
        self.buf = batch.into_buf();
    }
}

impl Drop for BatchQueue {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once, before the client (see the module docs).
        unsafe { rd::rd_kafka_queue_destroy(self.queue) };
    }
}

/// Messages taken off a [`BatchQueue`]; destroyed when the batch is dropped.
pub(super) struct Batch {
    messages: Vec<*mut rd::rd_kafka_message_t>,
}

impl Batch {
    /// How many messages it holds.
    pub(super) fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether it holds none.
    pub(super) fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The messages, in queue order.
    pub(super) fn iter(&self) -> impl Iterator<Item = RawMessage<'_>> {
        self.messages.iter().map(|&m| RawMessage {
            // SAFETY: a message returned by `rd_kafka_consume_batch_queue` is valid until it
            // is destroyed in `destroy_all`, which needs `&mut self`.
            msg: unsafe { &*m },
        })
    }

    fn destroy_all(&mut self) {
        for m in self.messages.drain(..) {
            // SAFETY: each message is destroyed exactly once (drained).
            unsafe { rd::rd_kafka_message_destroy(m) };
        }
    }

    fn into_buf(mut self) -> Vec<*mut rd::rd_kafka_message_t> {
        self.destroy_all();
        std::mem::take(&mut self.messages)
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.destroy_all();
    }
}

/// One message of a [`Batch`], borrowed.
#[derive(Clone, Copy)]
pub(super) struct RawMessage<'a> {
    msg: &'a rd::rd_kafka_message_t,
}

impl<'a> RawMessage<'a> {
    /// The error this message carries instead of data (a per-partition consumer error), as
    /// librdkafka describes it.
    pub(super) fn error(&self) -> Option<String> {
        if self.msg.err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return None;
        }
        // SAFETY: `rd_kafka_err2str` returns a static NUL-terminated string; an error message's
        // payload, when present, is its NUL-free error text of `len` bytes.
        let code = unsafe { CStr::from_ptr(rd::rd_kafka_err2str(self.msg.err)) };
        let detail = self
            .payload()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        Some(format!("{} ({detail})", code.to_string_lossy()))
    }

    /// Whether this is the end-of-partition marker (only with `enable.partition.eof`).
    pub(super) fn is_partition_eof(&self) -> bool {
        self.msg.err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__PARTITION_EOF
    }

    /// Its topic's name, as bytes.
    pub(super) fn topic(&self) -> &'a [u8] {
        if self.msg.rkt.is_null() {
            return b"";
        }
        // SAFETY: a message holds a reference to its topic handle, whose name is a
        // NUL-terminated string that lives as long as the handle.
        unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(self.msg.rkt)) }.to_bytes()
    }

    pub(super) fn partition(&self) -> i32 {
        self.msg.partition
    }

    pub(super) fn offset(&self) -> i64 {
        self.msg.offset
    }

    /// Its timestamp in milliseconds, if it has one.
    pub(super) fn timestamp(&self) -> Option<i64> {
        let mut kind = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        // SAFETY: a valid message; `kind` is written.
        let ms = unsafe { rd::rd_kafka_message_timestamp(self.msg, &mut kind) };
        (kind != rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE && ms >= 0)
            .then_some(ms)
    }

    pub(super) fn key(&self) -> Option<&'a [u8]> {
        bytes(self.msg.key, self.msg.key_len)
    }

    pub(super) fn payload(&self) -> Option<&'a [u8]> {
        bytes(self.msg.payload, self.msg.len)
    }

    /// Its headers, in order (a header may have no value).
    pub(super) fn headers(&self) -> Vec<(String, Option<Vec<u8>>)> {
        let mut headers = ptr::null_mut();
        // SAFETY: a valid message; `headers` is written only on success and belongs to the
        // message (not freed here).
        let err = unsafe { rd::rd_kafka_message_headers(self.msg, &mut headers) };
        if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || headers.is_null() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for i in 0.. {
            let (mut name, mut value, mut size) = (ptr::null(), ptr::null(), 0usize);
            // SAFETY: `headers` is the message's list; the out-pointers are written on success
            // and point into the list (a NUL-terminated name, `size` bytes of value).
            let err = unsafe {
                rd::rd_kafka_header_get_all(headers, i, &mut name, &mut value, &mut size)
            };
            if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
                break;
            }
            // SAFETY: as above.
            let name = unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
            out.push((name, bytes(value, size).map(<[u8]>::to_vec)));
        }
        out
    }
}

/// The `len` bytes at `data`, or `None` for a null pointer.
fn bytes<'a>(data: *const c_void, len: usize) -> Option<&'a [u8]> {
    // SAFETY: librdkafka's key, payload and header values are `len` bytes at `data`, alive as
    // long as the message (the caller ties `'a` to it).
    (!data.is_null()).then(|| unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
}

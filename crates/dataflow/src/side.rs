//! Native side outputs: an operator with side outputs has one timely output per side output
//! that the job reads, next to its main output (Flink's `OutputTag` outputs of an operator).
//!
//! `DataStream::side_output(&tag)` on such an operator's stream adds a side node to the plan
//! ([`crate::plan::NodeKind::Side`]) that carries the tag and a typed [`SidePort`]. When the
//! operator is built on a worker, it asks each port of the side nodes that read it for a
//! timely output of records of the tag's type ([`SidePort::new_output`]); the side node's
//! stream is that output, with no operator of its own. While the operator runs, its function
//! emits to a tag through [`SideOuts::push`], which finds the typed buffer of the tag's output
//! by the tag's id (and type); a record for a tag that nothing reads is dropped, as in Flink.
//! The operator flushes the buffers with the capability of the records that caused them, so
//! every side output follows the epochs (and checkpoint cuts) of the main output.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use spate_types::Data;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::{Capability, CapabilityTrait, InputCapability};
use timely::progress::{ChangeBatch, Stamp};

use crate::plan::{Epoch, ErasedStream, Flow, WStream};
use crate::time::{AtEpoch, Timestamp};

/// Makes the timely output of one side output (records of one type), when the operator that
/// emits it is built.
pub(crate) trait SidePort: Send + Sync {
    /// The tag's id.
    fn id(&self) -> &Arc<str>;

    /// The type of the side output's records.
    fn record_type(&self) -> TypeId;

    /// Adds the side output to `builder`: the buffer the operator fills, and the stream it
    /// makes (with the watermark `wm`).
    fn new_output<'s>(
        &self,
        builder: &mut OperatorBuilder<'s, Epoch>,
        wm: &WStream<'s>,
    ) -> (Box<dyn SideOut>, ErasedStream);
}

/// The port of side outputs of records of type `X`.
pub(crate) struct Port<X>(pub(crate) Arc<str>, pub(crate) PhantomData<fn() -> X>);

impl<X: Data> SidePort for Port<X> {
    fn id(&self) -> &Arc<str> {
        &self.0
    }

    fn record_type(&self) -> TypeId {
        TypeId::of::<X>()
    }

    fn new_output<'s>(
        &self,
        builder: &mut OperatorBuilder<'s, Epoch>,
        wm: &WStream<'s>,
    ) -> (Box<dyn SideOut>, ErasedStream) {
        let port = builder.shape().outputs();
        let (output, data) = builder.new_output::<Vec<(Timestamp, X)>>();
        let out = Typed {
            id: Arc::clone(&self.0),
            port,
            output: OutputBuilder::from(output),
            buf: Vec::new(),
            sent: None,
        };
        let stream = ErasedStream::new(Flow {
            data,
            wm: wm.clone(),
        });
        (Box::new(out), stream)
    }
}

/// One side output of a running operator: its buffer and its timely output.
pub(crate) trait SideOut {
    /// The tag's id.
    fn id(&self) -> &Arc<str>;
    /// The buffer, a `Vec<(Timestamp, X)>`.
    fn buffer(&mut self) -> &mut dyn Any;
    /// Sends the buffered records with `caps`' capability for this output.
    fn flush(&mut self, caps: &dyn PortCaps);
    /// Drops the buffered records.
    fn clear(&mut self);
    /// Counts the records it sends into `sent` (the operator instance's cell).
    fn count_into(&mut self, sent: Arc<std::sync::atomic::AtomicU64>);
}

/// The capabilities an operator sends with, by output port: an input's capability (valid
/// for every output), or [`Caps`].
pub(crate) trait PortCaps {
    /// The capability for output `port`.
    fn for_port(&self, port: usize) -> &dyn CapabilityTrait<Epoch>;
}

impl PortCaps for InputCapability<Epoch> {
    fn for_port(&self, _port: usize) -> &dyn CapabilityTrait<Epoch> {
        self
    }
}

/// A capability for each output of an operator, at one epoch: what an operator holds to
/// emit later (records held past a checkpoint cut, a watermark waiting for its records).
pub(crate) struct Caps(Vec<Capability<Epoch>>);

impl Caps {
    /// The operator's initial capabilities.
    pub(crate) fn new(caps: Vec<Capability<Epoch>>) -> Self {
        debug_assert!(caps.windows(2).all(|w| w[0].time() == w[1].time()));
        Caps(caps)
    }

    /// `cap`'s least time for each of `ports` outputs (`None` for an empty stamp).
    pub(crate) fn retain(cap: &InputCapability<Epoch>, ports: usize) -> Option<Self> {
        (0..ports)
            .map(|p| cap.retain_least(p))
            .collect::<Option<Vec<_>>>()
            .map(Caps)
    }

    /// The epoch.
    pub(crate) fn time(&self) -> &Epoch {
        self.0[0].time()
    }

    /// The capability for output `port`.
    pub(crate) fn port(&self, port: usize) -> &Capability<Epoch> {
        &self.0[port]
    }

    /// Moves every capability on to `time`.
    pub(crate) fn downgrade(&mut self, time: &Epoch) {
        for cap in &mut self.0 {
            cap.downgrade(time);
        }
    }
}

impl Clone for Caps {
    fn clone(&self) -> Self {
        Caps(self.0.clone())
    }
}

impl PortCaps for Caps {
    fn for_port(&self, port: usize) -> &dyn CapabilityTrait<Epoch> {
        &self.0[port]
    }
}

impl AtEpoch for Caps {
    fn epoch(&self) -> Epoch {
        *self.time()
    }
}

/// A capability behind a reference to its trait (timely's sessions take a sized one).
struct DynCap<'a>(&'a dyn CapabilityTrait<Epoch>);

impl CapabilityTrait<Epoch> for DynCap<'_> {
    fn stamp(&self) -> Stamp<Epoch> {
        self.0.stamp()
    }

    fn valid_for_output(&self, buffer: &Rc<RefCell<ChangeBatch<Epoch>>>, port: usize) -> bool {
        self.0.valid_for_output(buffer, port)
    }
}

struct Typed<X: Data> {
    id: Arc<str>,
    port: usize,
    output: OutputBuilder<Epoch, CapacityContainerBuilder<Vec<(Timestamp, X)>>>,
    buf: Vec<(Timestamp, X)>,
    sent: Option<Arc<std::sync::atomic::AtomicU64>>,
}

impl<X: Data> SideOut for Typed<X> {
    fn id(&self) -> &Arc<str> {
        &self.id
    }

    fn buffer(&mut self) -> &mut dyn Any {
        &mut self.buf
    }

    fn flush(&mut self, caps: &dyn PortCaps) {
        if !self.buf.is_empty() {
            if let Some(sent) = &self.sent {
                crate::metrics::add(sent, self.buf.len() as u64);
            }
            self.output
                .activate()
                .session(&DynCap(caps.for_port(self.port)))
                .give_container(&mut self.buf);
            self.buf.clear();
        }
    }

    fn clear(&mut self) {
        self.buf.clear();
    }

    fn count_into(&mut self, sent: Arc<std::sync::atomic::AtomicU64>) {
        self.sent = Some(sent);
    }
}

/// The side outputs of one operator instance, those the job reads.
#[derive(Default)]
pub(crate) struct SideOuts(Vec<Box<dyn SideOut>>);

impl SideOuts {
    /// The side outputs `outs`.
    pub(crate) fn new(outs: Vec<Box<dyn SideOut>>) -> Self {
        SideOuts(outs)
    }

    /// Buffers `value` at `ts` for the side output `id`; dropped when nothing reads it.
    pub(crate) fn push<X: 'static>(&mut self, id: &Arc<str>, ts: Timestamp, value: X) {
        for out in &mut self.0 {
            let same = Arc::ptr_eq(out.id(), id) || out.id() == id;
            if same {
                if let Some(buf) = out.buffer().downcast_mut::<Vec<(Timestamp, X)>>() {
                    buf.push((ts, value));
                    return;
                }
            }
        }
    }

    /// Sends every buffered record at `cap`'s time.
    pub(crate) fn flush(&mut self, caps: &dyn PortCaps) {
        for out in &mut self.0 {
            out.flush(caps);
        }
    }

    /// Drops every buffered record.
    pub(crate) fn clear(&mut self) {
        for out in &mut self.0 {
            out.clear();
        }
    }
}

/// Adds the side outputs `ports` to `builder`: the running outputs, and the streams of the
/// side nodes by tag id and record type.
pub(crate) fn new_outputs<'s>(
    ports: &[Arc<dyn SidePort>],
    builder: &mut OperatorBuilder<'s, Epoch>,
    wm: &WStream<'s>,
    cells: &crate::metrics::Cells,
) -> (SideOuts, Vec<(Arc<str>, TypeId, ErasedStream)>) {
    let mut outs = Vec::with_capacity(ports.len());
    let mut streams = Vec::with_capacity(ports.len());
    for port in ports {
        let (mut out, stream) = port.new_output(builder, wm);
        out.count_into(cells.side_counter(port.id()));
        outs.push(out);
        streams.push((Arc::clone(port.id()), port.record_type(), stream));
    }
    (SideOuts::new(outs), streams)
}

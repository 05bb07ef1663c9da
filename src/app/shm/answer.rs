//! Hook 2 while the answer arrives (module doc of `app::shm`): a request
//! holding output windows is called with a reply tap (`upstream::reply`),
//! and each raw output of the upstream's answer that goes to a window is
//! written there chunk by chunk, as its HTTP/2 frames arrive, instead of
//! being collected whole first. The answer's other raw outputs are
//! collected as usual; outputs the upstream sent as typed `contents` are
//! written by [`Held::write`] once the answer is complete.
//!
//! From [`OFF_THREAD_BYTES`] of held windows on, the writes run on tokio's
//! blocking pool (one thread for the whole answer, fed by the tap's bounded
//! queue), so the serving thread keeps receiving while the copy runs.

use bytes::Bytes;
use tokio::sync::mpsc;

use super::{on_blocking_pool, Held, Lease, OFF_THREAD_BYTES};
use crate::app::door::{self, InferCall};
use crate::app::routing::Routed;
use crate::body::BodyRest;
use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::model::{InferRequest, InferResponse};
use crate::proto::inference::ModelInferResponse;
use crate::translate::{from_grpc, outputs};
use crate::upstream::reply::{self, ended_without_answer, join, Tapped};

/// `ModelInfer` of a request that holds output windows (`held`, not
/// empty), through the door with a reply tap: their outputs' bytes are in
/// the regions when it returns, and the answer lists them with empty
/// `data`.
pub(crate) async fn call_into(
    ctx: &RequestContext,
    request: &InferRequest,
    rest: Option<&BodyRest>,
    routed: &Routed,
    held: Held,
) -> Result<InferResponse> {
    let (tap, tapped) = reply::tap();
    let call = InferCall::new(request, rest.cloned(), routed).tapped(tap.clone());
    let sending = async {
        let sent = door::infer(ctx, call).await;
        tap.end(sent.as_ref().map(drop).map_err(Error::clone)).await;
        sent
    };
    let sink = Sink::new(request, routed, held);
    let (sent, written) = tokio::join!(sending, sink.drain(tapped));
    // The sink's own failure (a window too small, a region gone) is why
    // the call was given up; otherwise both tell the call's outcome.
    let (response, rest_held) = written?;
    sent?;
    let mut response = response;
    rest_held.write(&mut response).await?;
    Ok(response)
}

/// Where the answer's raw outputs go, walked item by item.
struct Sink {
    /// The request's id, model and requested outputs (no inputs): enough
    /// to translate the answer and check it names what was asked.
    request: InferRequest,
    /// The call's route: the answer's head is made the client's by it.
    routed: Routed,
    held: Held,
    head: Option<ModelInferResponse>,
    /// The raw outputs so far, one per entry: empty for one written into
    /// its window.
    raw: Vec<Vec<Bytes>>,
    /// The entry being written into a window: the lease's index in
    /// `held` and the bytes written so far.
    writing: Option<(usize, usize)>,
    /// For each lease in `held`: its output came as a raw entry, written.
    written: Vec<bool>,
}

/// The answer, translated, with what is still held: windows whose output
/// came as typed `contents` (or not at all), written from the answer.
type Drained = (InferResponse, Held);

impl Sink {
    fn new(request: &InferRequest, routed: &Routed, held: Held) -> Sink {
        Sink {
            request: InferRequest {
                id: request.id.clone(),
                model_name: request.model_name.clone(),
                model_version: request.model_version.clone(),
                outputs: request.outputs.clone(),
                ..InferRequest::default()
            },
            routed: routed.clone(),
            written: vec![false; held.outputs.len()],
            held,
            head: None,
            raw: Vec::new(),
            writing: None,
        }
    }

    /// Takes every item of `tapped` up to the call's end: here, or on the
    /// blocking pool when the windows are large (module doc).
    async fn drain(mut self, mut tapped: mpsc::Receiver<Tapped>) -> Result<Drained> {
        let bytes: usize = self.held.outputs.iter().map(|(_, l)| l.byte_size()).sum();
        if bytes < OFF_THREAD_BYTES {
            while let Some(item) = tapped.recv().await {
                if let Some(drained) = self.take(item)? {
                    return Ok(drained);
                }
            }
            return Err(ended_without_answer());
        }
        on_blocking_pool(move || {
            while let Some(item) = tapped.blocking_recv() {
                if let Some(drained) = self.take(item)? {
                    return Ok(drained);
                }
            }
            Err(ended_without_answer())
        })
        .await
    }

    /// One item of the answer; the answer once the call ended well.
    fn take(&mut self, item: Tapped) -> Result<Option<Drained>> {
        match item {
            Tapped::Head { mut response, .. } => {
                door::client_answer(&self.routed, &self.request, &mut response)?;
                // Triton's order: an output the model lacks is refused
                // before any output is written.
                let listed = from_grpc::model_infer(response.clone(), &[]);
                outputs::requested_mask(&listed, &self.request)?;
                self.head = Some(response);
            }
            Tapped::Entry(n) => self.enter(n)?,
            Tapped::Data(chunk) => match self.writing {
                Some((lease, written)) => {
                    self.held.outputs[lease].1.write_at(written, &chunk)?;
                    self.writing = Some((lease, written + chunk.len()));
                }
                None => {
                    if let Some(entry) = self.raw.last_mut() {
                        entry.push(chunk);
                    }
                }
            },
            Tapped::Ended(result) => {
                result?;
                return self.finish().map(Some);
            }
        }
        Ok(None)
    }

    /// A raw output of `n` bytes begins: into its window if one is held
    /// for it (it must fit), else collected.
    fn enter(&mut self, n: u64) -> Result<()> {
        self.writing = None;
        let name = self
            .head
            .as_ref()
            .and_then(|head| head.outputs.get(self.raw.len()))
            .map(|output| output.name.as_str())
            .ok_or_else(|| Error::internal("the upstream sent more raw outputs than outputs"))?;
        self.raw.push(Vec::new());
        if let Some(i) = self.held.outputs.iter().position(|(held, _)| held == name) {
            let lease: &Lease = &self.held.outputs[i].1;
            lease.fits(name, usize::try_from(n).ok())?;
            self.writing = Some((i, 0));
            self.written[i] = true;
        }
        Ok(())
    }

    /// The answer from its head and the collected raw outputs; the windows
    /// written here are let go.
    fn finish(&mut self) -> Result<Drained> {
        let head = self.head.take().ok_or_else(ended_without_answer)?;
        let raw = std::mem::take(&mut self.raw)
            .into_iter()
            .map(join)
            .collect();
        let mut written = self.written.iter();
        let mut held = std::mem::take(&mut self.held);
        held.outputs
            .retain(|_| !written.next().copied().unwrap_or(false));
        let response = from_grpc::answer(head, Some(raw), &self.request)?;
        Ok((response, held))
    }
}

#[cfg(test)]
mod tests {
    use super::super::regions::tests::Dir;
    use super::super::{Bridge, Regions};
    use super::*;
    use crate::config::SharedMemory;
    use crate::model::{OutputKind, RequestedOutput, SharedMemory as Shm};
    use crate::proto::inference::model_infer_response::InferOutputTensor;
    use crate::proto::inference::{InferTensorContents, SystemSharedMemoryRegisterRequest};

    /// A bridge with region `out` = the whole object `/obj` of `len` bytes,
    /// and a request whose outputs `names` go to 8-byte windows of it, one
    /// after another, plus `OUTPUT9` (binary).
    async fn held(dir: &Dir, len: usize, names: &[&str]) -> (Bridge, Sink) {
        dir.object("obj", len);
        let bridge = Bridge::new(Regions::new(&SharedMemory {
            dir: dir.0.clone(),
            ..SharedMemory::default()
        }));
        bridge
            .register(&SystemSharedMemoryRegisterRequest {
                name: "out".into(),
                key: "/obj".into(),
                offset: 0,
                byte_size: len as u64,
            })
            .unwrap();
        let output = |(i, name): (usize, &&str)| RequestedOutput {
            name: name.to_string(),
            classification: 0,
            kind: OutputKind::SharedMemory,
            shared_memory: Some(Shm {
                region: "out".into(),
                offset: 8 * i as u64,
                byte_size: 8,
            }),
        };
        let mut request = InferRequest {
            model_name: "add_sub".into(),
            outputs: names.iter().enumerate().map(output).collect(),
            ..InferRequest::default()
        };
        request.outputs.push(RequestedOutput {
            name: "OUTPUT9".into(),
            classification: 0,
            kind: OutputKind::Binary,
            shared_memory: None,
        });
        let held = bridge.take_regions(&mut request).await.unwrap();
        let sink = Sink::new(&request, &Routed::for_tests(), held);
        (bridge, sink)
    }

    fn head(names: &[&str]) -> Tapped {
        let output = |name: &&str| InferOutputTensor {
            name: name.to_string(),
            datatype: "UINT8".into(),
            shape: vec![8],
            ..Default::default()
        };
        Tapped::Head {
            response: ModelInferResponse {
                model_name: "add_sub".into(),
                outputs: names.iter().map(output).collect(),
                ..Default::default()
            },
            raw_follow: true,
        }
    }

    fn data(bytes: &[u8]) -> Tapped {
        Tapped::Data(Bytes::copy_from_slice(bytes))
    }

    /// Feeds `items`; the answer, once the last one ended it.
    fn feed(sink: &mut Sink, items: Vec<Tapped>) -> Result<Option<Drained>> {
        let mut last = None;
        for item in items {
            last = sink.take(item)?;
        }
        Ok(last)
    }

    #[tokio::test]
    async fn raw_outputs_go_into_their_windows_chunk_by_chunk() {
        let dir = Dir::new();
        let (_bridge, mut sink) = held(&dir, 16, &["OUTPUT0", "OUTPUT1"]).await;
        let items = vec![
            head(&["OUTPUT1", "OUTPUT9", "OUTPUT0"]),
            Tapped::Entry(8),
            data(&[1, 1, 1]),
            data(&[1; 5]),
            Tapped::Entry(4),
            data(&[9, 9]),
            data(&[9, 9]),
            Tapped::Entry(6),
            data(&[2; 6]),
            Tapped::Ended(Ok(())),
        ];
        let (response, left) = feed(&mut sink, items).unwrap().unwrap();
        assert!(left.outputs.is_empty(), "every window written");
        let data: Vec<&[u8]> = response.outputs.iter().map(|o| &o.data[..]).collect();
        assert_eq!(data, [&[][..], &[9; 4], &[]]);
        let object = std::fs::read(dir.0.join("obj")).unwrap();
        assert_eq!(object[..8], [2, 2, 2, 2, 2, 2, 6, 7], "OUTPUT0, 6 bytes");
        assert_eq!(object[8..], [1; 8], "OUTPUT1");
    }

    #[tokio::test]
    async fn an_output_larger_than_its_window_is_refused_before_a_byte_is_written() {
        let dir = Dir::new();
        let (_bridge, mut sink) = held(&dir, 16, &["OUTPUT0"]).await;
        let err = feed(
            &mut sink,
            vec![head(&["OUTPUT0", "OUTPUT9"]), Tapped::Entry(9)],
        )
        .unwrap_err();
        assert_eq!(
            (err.status(), err.message.as_str()),
            (400, "shared memory size specified with the request for output 'OUTPUT0' (8 bytes) should be at least 9 bytes to hold the results")
        );
        // An output the model lacks: refused at the head.
        let (_bridge, mut sink) = held(&Dir::new(), 16, &["OUTPUT7"]).await;
        let err = feed(&mut sink, vec![head(&["OUTPUT0"])]).unwrap_err();
        assert_eq!(err.status(), 400, "{}", err.message);
    }

    #[tokio::test]
    async fn a_region_truncated_while_an_output_is_written_gives_a_400() {
        let dir = Dir::new();
        let (_bridge, mut sink) = held(&dir, 16, &["OUTPUT0", "OUTPUT1"]).await;
        let first = vec![
            head(&["OUTPUT0", "OUTPUT1", "OUTPUT9"]),
            Tapped::Entry(8),
            data(&[1; 4]),
        ];
        assert!(feed(&mut sink, first).unwrap().is_none());
        std::fs::File::options()
            .write(true)
            .open(dir.0.join("obj"))
            .unwrap()
            .set_len(6)
            .unwrap();
        let err = sink.take(data(&[1; 4])).unwrap_err();
        assert_eq!(
            (err.status(), err.message.as_str()),
            (400, "shared memory region 'out': its object '/obj' is now 6 bytes, too short for bytes 4..8 (it was truncated)")
        );
    }

    #[tokio::test]
    async fn typed_contents_and_failed_calls() {
        let dir = Dir::new();
        let (_bridge, mut sink) = held(&dir, 16, &["OUTPUT0"]).await;
        let Tapped::Head { mut response, .. } = head(&["OUTPUT0", "OUTPUT9"]) else {
            unreachable!()
        };
        response.outputs[0].contents = Some(InferTensorContents {
            uint_contents: vec![3; 8],
            ..Default::default()
        });
        let items = vec![
            Tapped::Head {
                response,
                raw_follow: false,
            },
            Tapped::Ended(Ok(())),
        ];
        let (mut response, left) = feed(&mut sink, items).unwrap().unwrap();
        assert_eq!(left.outputs.len(), 1, "written from the answer afterwards");
        left.write(&mut response).await.unwrap();
        assert_eq!(std::fs::read(dir.0.join("obj")).unwrap()[..8], [3; 8]);

        let (_bridge, mut sink) = held(&Dir::new(), 16, &["OUTPUT0"]).await;
        let failed = Tapped::Ended(Err(Error::internal("gone")));
        let err = feed(&mut sink, vec![head(&["OUTPUT0", "OUTPUT9"]), failed]).unwrap_err();
        assert_eq!(err.message, "gone");
    }
}

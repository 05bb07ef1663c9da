//! Bridge mode on a `ModelStreamInfer` stream (the gRPC front): each
//! request of the stream is bridged on its way up — the input regions it
//! names read into raw entries, its output windows leased (hook 1,
//! [`Bridge::take_regions`]) — and each response on its way down has its
//! outputs written into its request's windows and emptied in the message
//! (hook 2, [`Held::write_kept`]); the windows are let go with the
//! request's last response (`triton_final_response`). A response is
//! matched to its request by its id, which Triton echoes; among requests
//! with the same id (or none), in order.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::{Bridge, Held};
use crate::error::Result;
use crate::proto::inference::{ModelInferRequest, ModelStreamInferResponse};
use crate::translate::from_grpc::request::{infer_request, names_shared_memory};
use crate::translate::from_grpc::stream::FINAL_RESPONSE;
use crate::translate::{from_grpc, to_grpc};

/// The windows of one stream's requests still waiting for their last
/// response, in the order the requests were sent.
#[derive(Debug, Default)]
pub(crate) struct StreamWindows {
    pending: Mutex<VecDeque<(String, Held)>>,
}

impl StreamWindows {
    /// Bridges one request on its way upstream: unchanged when it names no
    /// shared memory; otherwise read and leased, and sent as plain tensors.
    /// Its failure is the request's own (the stream goes on).
    pub(crate) async fn request(
        &self,
        bridge: &Bridge,
        message: ModelInferRequest,
    ) -> Result<ModelInferRequest> {
        let id = message.id.clone();
        if !names_shared_memory(&message) {
            self.push(id, Held::default());
            return Ok(message);
        }
        let mut request = infer_request(message)?;
        let held = bridge.take_regions(&mut request).await?;
        self.push(id, held);
        Ok(to_grpc::model_infer(&request))
    }

    fn push(&self, id: String, held: Held) {
        self.lock().push_back((id, held));
    }

    /// Writes one response's outputs into its request's windows, emptying
    /// them in the message; its request's last response lets the windows
    /// go.
    pub(crate) async fn response(&self, message: &mut ModelStreamInferResponse) -> Result<()> {
        let Some(response) = message.infer_response.as_mut() else {
            return Ok(());
        };
        let last = !matches!(
            response
                .parameters
                .get(FINAL_RESPONSE)
                .and_then(|p| p.parameter_choice.as_ref()),
            Some(crate::proto::inference::infer_parameter::ParameterChoice::BoolParam(false))
        );
        let taken = {
            let mut pending = self.lock();
            let at = pending.iter().position(|(id, _)| *id == response.id);
            at.and_then(|at| pending.remove(at))
        };
        let Some((id, held)) = taken else {
            return Ok(());
        };
        if held.no_outputs() {
            if !last {
                self.lock().push_front((id, held));
            }
            return Ok(());
        }
        let mut neutral = from_grpc::model_infer(std::mem::take(response), id.as_bytes());
        let written = held.write_kept(&mut neutral).await;
        *response = to_grpc::response::infer_response(neutral);
        let held = written?;
        if !last {
            // More responses of this request will come: first in line again.
            self.lock().push_front((id, held));
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(String, Held)>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

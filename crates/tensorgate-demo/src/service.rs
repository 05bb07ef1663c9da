//! The gRPC services: `inference.GRPCInferenceService` over the model table
//! (availability, statistics, inference, streaming) and
//! `grpc.health.v1.Health`.
//!
//! Errors carry Triton's texts and codes (INVALID_ARG → INVALID_ARGUMENT,
//! NOT_FOUND → NOT_FOUND, INTERNAL → INTERNAL, UNAVAILABLE → UNAVAILABLE,
//! UNSUPPORTED → UNIMPLEMENTED).

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use super::capacity::Gate;
use super::classify::classify;
use super::models::{catalog, protocol_name, ModelSpec, Outputs, Pacing, Responses, VERSION};
use super::quirks::Quirks;
use super::stream_stats::{pause, StreamCounters};
use super::validate::{prepare, Prepared};
use tensorgate_proto::health::health_check_response::ServingStatus;
use tensorgate_proto::health::health_server::Health;
use tensorgate_proto::health::{HealthCheckRequest, HealthCheckResponse};
use tensorgate_proto::inference::grpc_inference_service_server::GrpcInferenceService;
use tensorgate_proto::inference::infer_parameter::ParameterChoice;
use tensorgate_proto::inference::model_infer_response::InferOutputTensor;
use tensorgate_proto::inference::repository_index_response::ModelIndex;
use tensorgate_proto::inference::*;

/// Per-model counters, updated once per successful request.
#[derive(Debug, Default)]
struct Counters {
    last_inference_ms: u64,
    inference_count: u64,
    execution_count: u64,
    success_count: u64,
    success_ns: u64,
    /// batch size → (executions, ns).
    batches: BTreeMap<u64, (u64, u64)>,
}

/// Everything the service knows; shared with [`super::DemoUpstream`].
#[derive(Debug)]
pub(crate) struct DemoState {
    models: Vec<ModelSpec>,
    /// Per model (same index): loaded (READY) or unloaded.
    loaded: Vec<AtomicBool>,
    counters: Vec<Mutex<Counters>>,
    /// Per model (same index): the slots of a model of fixed capacity.
    gates: Vec<Option<Gate>>,
    pub infer_count: AtomicU64,
    pub last_request: Mutex<Option<ModelInferRequest>>,
    /// The `traceparent` metadata of the last `ModelInfer`.
    pub last_traceparent: Mutex<Option<String>>,
    /// What `ServerReady` reports (fault tests turn it off).
    pub ready: AtomicBool,
    /// While `true`, every call waits (fault tests: a hung server).
    pub hang: tokio::sync::watch::Sender<bool>,
    pub streams: StreamCounters,
    /// How the demo differs from Triton (none by default).
    pub quirks: std::sync::RwLock<Quirks>,
    /// Calls of the RPCs a server may lack, by method name.
    pub calls: Mutex<BTreeMap<&'static str, u64>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DemoState {
    pub(crate) fn new() -> DemoState {
        let mut models = catalog();
        models.extend(super::llm::models());
        models.sort_by_key(|m| m.name);
        DemoState {
            loaded: models.iter().map(|_| AtomicBool::new(true)).collect(),
            counters: models.iter().map(|_| Mutex::default()).collect(),
            gates: models
                .iter()
                .map(|m| match m.pacing {
                    Pacing::Capacity { slots, ms } => {
                        Some(Gate::new(slots, Duration::from_millis(ms)))
                    }
                    _ => None,
                })
                .collect(),
            models,
            infer_count: AtomicU64::new(0),
            last_request: Mutex::new(None),
            last_traceparent: Mutex::new(None),
            ready: AtomicBool::new(true),
            hang: tokio::sync::watch::Sender::new(false),
            streams: StreamCounters::default(),
            quirks: std::sync::RwLock::default(),
            calls: Mutex::default(),
        }
    }

    pub(crate) fn set_loaded(&self, name: &str, loaded: bool) {
        if let Some(index) = self.find(name) {
            self.loaded[index].store(loaded, Ordering::SeqCst);
        }
    }

    /// Returns once the server is not hung.
    async fn unhung(&self) {
        let mut hang = self.hang.subscribe();
        let _ = hang.wait_for(|hung| !*hung).await;
    }

    pub(crate) fn quirks(&self) -> Quirks {
        self.quirks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Counts a call of `method`; refuses it if the server lacks it.
    fn called(&self, method: &'static str) -> Result<(), Status> {
        *lock(&self.calls).entry(method).or_default() += 1;
        self.quirks().refuse_method(method).map_or(Ok(()), Err)
    }

    /// The slots of `name`, a model of fixed capacity.
    #[cfg(test)]
    pub(crate) fn gate(&self, name: &str) -> Option<&Gate> {
        self.gates[self.find(name)?].as_ref()
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.models.iter().position(|m| m.name == name)
    }

    fn is_loaded(&self, index: usize) -> bool {
        self.loaded[index].load(Ordering::SeqCst)
    }

    /// Finds a servable model (`GetModel`): unknown model or version →
    /// NOT_FOUND, unloaded → NOT_FOUND / UNAVAILABLE as Triton words it.
    fn lookup(&self, name: &str, version: &str) -> Result<usize, Status> {
        let version = match self.quirks().ignore_versions {
            true => None,
            false => parse_version(version)?,
        };
        let unknown = |what: String| format!("Request for unknown model: '{name}' {what}");
        let Some(index) = self.find(name) else {
            return Err(Status::not_found(unknown("is not found".into())));
        };
        match version {
            Some(v) if v != VERSION => Err(Status::not_found(unknown(format!(
                "version {v} is not found"
            )))),
            Some(v) if !self.is_loaded(index) => Err(Status::unavailable(unknown(format!(
                "version {v} is not at ready state"
            )))),
            None if !self.is_loaded(index) => Err(Status::not_found(unknown(
                "has no available versions".into(),
            ))),
            _ => Ok(index),
        }
    }

    fn record_request(&self, request: &ModelInferRequest) {
        self.infer_count.fetch_add(1, Ordering::SeqCst);
        *lock(&self.last_request) = Some(request.clone());
    }

    fn record_success(&self, index: usize, batch_size: u32, elapsed: Duration) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let batch = u64::from(batch_size.max(1));
        let mut c = lock(&self.counters[index]);
        c.last_inference_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        c.inference_count += batch;
        c.execution_count += 1;
        c.success_count += 1;
        c.success_ns += ns;
        let entry = c.batches.entry(batch).or_default();
        entry.0 += 1;
        entry.1 += ns;
    }

    fn statistics(&self, index: usize) -> ModelStatistics {
        let c = lock(&self.counters[index]);
        let duration = |count, ns| Some(StatisticDuration { count, ns });
        ModelStatistics {
            name: self.models[index].name.to_owned(),
            version: VERSION.to_string(),
            last_inference: c.last_inference_ms,
            inference_count: c.inference_count,
            execution_count: c.execution_count,
            inference_stats: Some(InferStatistics {
                success: duration(c.success_count, c.success_ns),
                fail: duration(0, 0),
                queue: duration(0, 0),
                // Every success had an input and an output phase (timed as
                // zero): clients such as perf_analyzer require the three
                // compute counts to agree.
                compute_input: duration(c.success_count, 0),
                compute_infer: duration(c.success_count, c.success_ns),
                compute_output: duration(c.success_count, 0),
                cache_hit: duration(0, 0),
                cache_miss: duration(0, 0),
            }),
            batch_stats: c
                .batches
                .iter()
                .map(|(&batch_size, &(count, ns))| InferBatchStatistics {
                    batch_size,
                    compute_input: duration(count, 0),
                    compute_infer: duration(count, ns),
                    compute_output: duration(count, 0),
                })
                .collect(),
            memory_usage: Vec::new(),
            response_stats: HashMap::new(),
        }
    }
}

/// `GetModelVersionFromString`: empty = latest; otherwise C++ `std::stol`
/// (leading blanks, optional sign, digits, rest ignored), which must be >= 0.
fn parse_version(version: &str) -> Result<Option<i64>, Status> {
    if version.is_empty() {
        return Ok(None);
    }
    let stol_failed = || {
        Status::invalid_argument(format!(
            "failed to get model version from specified version string '{version}' (details: \
             stol), version should be an integral value > 0"
        ))
    };
    let text = version.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'-') => ("-", &text[1..]),
        Some(b'+') => ("", &text[1..]),
        _ => ("", text),
    };
    let digits = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return Err(stol_failed());
    }
    let value: i64 = format!("{sign}{digits}")
        .parse()
        .map_err(|_| stol_failed())?;
    if value < 0 {
        return Err(Status::invalid_argument(format!(
            "invalid model version specified '{version}' , version should be an integral value > 0"
        )));
    }
    Ok(Some(value))
}

/// The request parameter `delay_ms` (int64, double or numeric string).
fn request_delay_ms(request: &ModelInferRequest) -> Option<f64> {
    match request
        .parameters
        .get("delay_ms")?
        .parameter_choice
        .as_ref()?
    {
        ParameterChoice::Int64Param(ms) => Some(*ms as f64),
        ParameterChoice::DoubleParam(ms) => Some(*ms),
        ParameterChoice::StringParam(ms) => ms.trim().parse().ok(),
        _ => None,
    }
}

async fn sleep_ms(ms: f64) {
    if ms > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
    }
}

fn bool_param(value: bool) -> InferParameter {
    InferParameter {
        parameter_choice: Some(ParameterChoice::BoolParam(value)),
    }
}

/// The inference service. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct DemoService {
    pub state: Arc<DemoState>,
}

impl DemoService {
    fn model(&self, index: usize) -> &ModelSpec {
        &self.state.models[index]
    }

    /// Looks the model up, applies the transaction-policy check of
    /// `ModelInfer` (not of streams) and validates the request (without its
    /// `outputs` when the demo ignores them, as KServe does).
    fn admit(
        &self,
        request: &ModelInferRequest,
        streaming: bool,
    ) -> Result<(usize, Prepared), Status> {
        let index = self
            .state
            .lookup(&request.model_name, &request.model_version)?;
        if self.model(index).decoupled && !streaming {
            return Err(Status::unimplemented(
                "ModelInfer RPC doesn't support models with decoupled transaction policy",
            ));
        }
        if self.state.quirks().ignore_requested_outputs {
            let every_output = ModelInferRequest {
                outputs: Vec::new(),
                ..request.clone()
            };
            return Ok((index, prepare(self.model(index), &every_output)?));
        }
        Ok((index, prepare(self.model(index), request)?))
    }

    /// Runs the model (after its request delay, or its turn and execution
    /// time when of fixed capacity) and counts the success.
    async fn execute(
        &self,
        index: usize,
        request: &ModelInferRequest,
        prepared: &Prepared,
    ) -> Result<Responses, Status> {
        let model = self.model(index);
        let start = Instant::now();
        if model.pacing == Pacing::RequestDelay {
            sleep_ms(request_delay_ms(request).unwrap_or(0.0)).await;
        }
        if let Some(gate) = &self.state.gates[index] {
            gate.execute().await;
        }
        let responses = (model.compute)(&prepared.inputs)?;
        self.state
            .record_success(index, prepared.batch_size, start.elapsed());
        Ok(responses)
    }

    /// One response: the requested outputs in model order, classified
    /// where asked, all data in `raw_output_contents`.
    fn response(
        &self,
        index: usize,
        request: &ModelInferRequest,
        prepared: &Prepared,
        outputs: Outputs,
    ) -> Result<ModelInferResponse, Status> {
        let model = self.model(index);
        let quirks = self.state.quirks();
        let mut response = ModelInferResponse {
            model_name: model.name.to_owned(),
            model_version: VERSION.to_string(),
            id: request.id.clone(),
            ..Default::default()
        };
        for output in outputs.into_iter().filter(|o| prepared.wants(&o.name)) {
            let output = match (
                prepared.classification.get(&output.name),
                model.output(&output.name),
            ) {
                (Some(&k), Some(spec)) => classify(&output, spec, k, model.batching())?,
                _ => output,
            };
            response.outputs.push(InferOutputTensor {
                name: output.name,
                datatype: protocol_name(output.dtype).to_owned(),
                shape: output.shape,
                ..Default::default()
            });
            response
                .raw_output_contents
                .push(quirks.output(output.data));
        }
        Ok(response)
    }

    /// Answers one request of a `ModelStreamInfer` stream on `tx`.
    async fn stream_one(
        &self,
        request: ModelInferRequest,
        tx: mpsc::Sender<Result<ModelStreamInferResponse, Status>>,
    ) {
        self.state.record_request(&request);
        // Errors before execution carry only the id; later ones also the
        // model name/version from the request and the final flag.
        let failure = |status: Status, final_flag: Option<bool>| {
            let mut response = ModelInferResponse {
                id: request.id.clone(),
                ..Default::default()
            };
            if let Some(final_flag) = final_flag {
                response.model_name = request.model_name.clone();
                response.model_version = request.model_version.clone();
                response
                    .parameters
                    .insert(FINAL_RESPONSE.to_owned(), bool_param(final_flag));
            }
            ModelStreamInferResponse {
                error_message: status.message().to_owned(),
                infer_response: Some(response),
            }
        };
        let (index, prepared) = match self.admit(&request, true) {
            Ok(admitted) => admitted,
            Err(status) => {
                let _ = tx.send(Ok(failure(status, None))).await;
                return;
            }
        };
        let responses = match self.execute(index, &request, &prepared).await {
            Ok(responses) => responses,
            Err(status) => {
                let _ = tx.send(Ok(failure(status, Some(true)))).await;
                return;
            }
        };
        let model = self.model(index);
        let mut responses = responses.peekable();
        if responses.peek().is_none() {
            // Only the final flag: sent as an empty response on request.
            if model.decoupled && prepared.empty_final_response {
                let mut response = ModelInferResponse {
                    model_name: request.model_name.clone(),
                    model_version: request.model_version.clone(),
                    id: request.id.clone(),
                    ..Default::default()
                };
                response
                    .parameters
                    .insert(FINAL_RESPONSE.to_owned(), bool_param(true));
                let _ = tx.send(Ok(stream_response(response))).await;
            }
            return;
        }
        let interval = match model.pacing {
            Pacing::Interval(ms) => request_delay_ms(&request).unwrap_or(ms as f64),
            _ => 0.0,
        };
        let mut first = true;
        while let Some(outputs) = responses.next() {
            if !std::mem::take(&mut first) && !pause(interval, &tx).await {
                self.state.streams.record_cancelled();
                return;
            }
            let final_flag = responses.peek().is_none();
            let outputs = match outputs {
                Ok(outputs) => outputs,
                Err(status) => {
                    // The model failed in the middle: its last response.
                    let _ = tx.send(Ok(failure(status, Some(true)))).await;
                    return;
                }
            };
            let message = match self.response(index, &request, &prepared, outputs) {
                Ok(mut response) => {
                    response
                        .parameters
                        .insert(FINAL_RESPONSE.to_owned(), bool_param(final_flag));
                    stream_response(response)
                }
                Err(status) => failure(status, Some(final_flag)),
            };
            if tx.send(Ok(message)).await.is_err() {
                self.state.streams.record_cancelled();
                return;
            }
            self.state.streams.record_sent();
        }
    }

    /// Whether a stream request should run on its own task: models that take
    /// time, so that later requests on the stream are not held up. Others
    /// are answered in order.
    fn takes_time(&self, request: &ModelInferRequest) -> bool {
        self.state
            .find(&request.model_name)
            .is_some_and(|i| self.model(i).pacing != Pacing::Immediate)
    }
}

/// Response parameter marking the last response of a streamed request.
const FINAL_RESPONSE: &str = "triton_final_response";

fn stream_response(response: ModelInferResponse) -> ModelStreamInferResponse {
    ModelStreamInferResponse {
        error_message: String::new(),
        infer_response: Some(response),
    }
}

type ResponseStream =
    Pin<Box<dyn Stream<Item = Result<ModelStreamInferResponse, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl GrpcInferenceService for DemoService {
    async fn server_live(
        &self,
        _: Request<ServerLiveRequest>,
    ) -> Result<Response<ServerLiveResponse>, Status> {
        Ok(Response::new(ServerLiveResponse { live: true }))
    }

    async fn server_ready(
        &self,
        _: Request<ServerReadyRequest>,
    ) -> Result<Response<ServerReadyResponse>, Status> {
        self.state.unhung().await;
        let ready = self.state.ready.load(Ordering::SeqCst);
        Ok(Response::new(ServerReadyResponse { ready }))
    }

    async fn model_ready(
        &self,
        request: Request<ModelReadyRequest>,
    ) -> Result<Response<ModelReadyResponse>, Status> {
        self.state.unhung().await;
        let request = request.into_inner();
        let version = parse_version(&request.version)?;
        let ready = self.state.find(&request.name).is_some_and(|index| {
            self.state.is_loaded(index) && version.is_none_or(|v| v == VERSION)
        });
        Ok(Response::new(ModelReadyResponse { ready }))
    }

    async fn server_metadata(
        &self,
        _: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        let extensions = [
            "classification",
            "model_repository",
            "model_configuration",
            "system_shared_memory",
            "cuda_shared_memory",
            "binary_tensor_data",
            "parameters",
            "statistics",
            "trace",
            "logging",
        ];
        Ok(Response::new(ServerMetadataResponse {
            name: "demo".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            extensions: self.state.quirks().extensions(&extensions),
        }))
    }

    async fn model_metadata(
        &self,
        request: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        self.state.called("ModelMetadata")?;
        self.state.unhung().await;
        let request = request.into_inner();
        let index = self.state.lookup(&request.name, &request.version)?;
        let metadata = self.model(index).metadata();
        Ok(Response::new(self.state.quirks().model_metadata(metadata)))
    }

    async fn model_infer(
        &self,
        request: Request<ModelInferRequest>,
    ) -> Result<Response<ModelInferResponse>, Status> {
        let traceparent = request.metadata().get("traceparent");
        *lock(&self.state.last_traceparent) = traceparent
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let request = request.into_inner();
        self.state.unhung().await;
        if let Some(refusal) = self.state.quirks().refuse_size(request.encoded_len()) {
            return Err(refusal);
        }
        self.state.record_request(&request);
        let (index, prepared) = self.admit(&request, false)?;
        let outputs = self
            .execute(index, &request, &prepared)
            .await?
            .next()
            .transpose()?
            .unwrap_or_default();
        Ok(Response::new(
            self.response(index, &request, &prepared, outputs)?,
        ))
    }

    type ModelStreamInferStream = ResponseStream;

    async fn model_stream_infer(
        &self,
        request: Request<Streaming<ModelInferRequest>>,
    ) -> Result<Response<Self::ModelStreamInferStream>, Status> {
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let service = self.clone();
        tokio::spawn(async move {
            // A broken or half-closed request stream ends the loop; the
            // response stream ends once every request has been answered.
            while let Ok(Some(request)) = incoming.message().await {
                if service.takes_time(&request) {
                    let (service, tx) = (service.clone(), tx.clone());
                    tokio::spawn(async move { service.stream_one(request, tx).await });
                } else {
                    service.stream_one(request, tx.clone()).await;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn model_config(
        &self,
        request: Request<ModelConfigRequest>,
    ) -> Result<Response<ModelConfigResponse>, Status> {
        self.state.called("ModelConfig")?;
        self.state.unhung().await;
        let request = request.into_inner();
        let index = self.state.lookup(&request.name, &request.version)?;
        Ok(Response::new(ModelConfigResponse {
            config: Some(self.model(index).config()),
        }))
    }

    async fn model_statistics(
        &self,
        request: Request<ModelStatisticsRequest>,
    ) -> Result<Response<ModelStatisticsResponse>, Status> {
        let request = request.into_inner();
        let version = parse_version(&request.version)?;
        let state = &self.state;
        let indices: Vec<usize> = if request.name.is_empty() {
            (0..state.models.len())
                .filter(|&i| state.is_loaded(i))
                .collect()
        } else {
            let name = &request.name;
            let index = state
                .find(name)
                .filter(|&i| state.is_loaded(i))
                .ok_or_else(|| {
                    Status::invalid_argument(format!("requested model '{name}' is not available"))
                })?;
            if version.is_some_and(|v| v != VERSION) {
                return Err(Status::invalid_argument(format!(
                    "requested model version is not available for model '{name}'"
                )));
            }
            vec![index]
        };
        Ok(Response::new(ModelStatisticsResponse {
            model_stats: indices.into_iter().map(|i| state.statistics(i)).collect(),
        }))
    }

    async fn repository_index(
        &self,
        request: Request<RepositoryIndexRequest>,
    ) -> Result<Response<RepositoryIndexResponse>, Status> {
        self.state.called("RepositoryIndex")?;
        self.state.unhung().await;
        let ready_only = request.into_inner().ready;
        let state = &self.state;
        let models = (0..state.models.len())
            .filter(|&i| !ready_only || state.is_loaded(i))
            .map(|i| {
                let (model_state, reason) = if state.is_loaded(i) {
                    ("READY", "")
                } else {
                    ("UNAVAILABLE", "unloaded")
                };
                ModelIndex {
                    name: state.models[i].name.to_owned(),
                    version: VERSION.to_string(),
                    state: model_state.to_owned(),
                    reason: reason.to_owned(),
                }
            })
            .collect();
        Ok(Response::new(RepositoryIndexResponse { models }))
    }

    async fn repository_model_load(
        &self,
        request: Request<RepositoryModelLoadRequest>,
    ) -> Result<Response<RepositoryModelLoadResponse>, Status> {
        let name = request.into_inner().model_name;
        let index = self.state.find(&name).ok_or_else(|| {
            Status::internal(format!(
                "failed to load '{name}', failed to poll from model repository"
            ))
        })?;
        self.state.loaded[index].store(true, Ordering::SeqCst);
        Ok(Response::new(RepositoryModelLoadResponse {}))
    }

    async fn repository_model_unload(
        &self,
        request: Request<RepositoryModelUnloadRequest>,
    ) -> Result<Response<RepositoryModelUnloadResponse>, Status> {
        let name = request.into_inner().model_name;
        if let Some(index) = self.state.find(&name) {
            self.state.loaded[index].store(false, Ordering::SeqCst);
        }
        Ok(Response::new(RepositoryModelUnloadResponse {}))
    }

    async fn system_shared_memory_status(
        &self,
        request: Request<SystemSharedMemoryStatusRequest>,
    ) -> Result<Response<SystemSharedMemoryStatusResponse>, Status> {
        let name = request.into_inner().name;
        if !name.is_empty() {
            return Err(Status::not_found(format!(
                "Unable to find system shared memory region: '{name}'"
            )));
        }
        Ok(Response::new(SystemSharedMemoryStatusResponse::default()))
    }

    async fn system_shared_memory_register(
        &self,
        request: Request<SystemSharedMemoryRegisterRequest>,
    ) -> Result<Response<SystemSharedMemoryRegisterResponse>, Status> {
        // The demo opens no shared memory: every key is one that cannot be opened.
        let key = request.into_inner().key;
        Err(Status::internal(format!(
            "Unable to open shared memory region: '{key}'"
        )))
    }

    async fn system_shared_memory_unregister(
        &self,
        _: Request<SystemSharedMemoryUnregisterRequest>,
    ) -> Result<Response<SystemSharedMemoryUnregisterResponse>, Status> {
        Ok(Response::new(SystemSharedMemoryUnregisterResponse {}))
    }

    async fn cuda_shared_memory_status(
        &self,
        request: Request<CudaSharedMemoryStatusRequest>,
    ) -> Result<Response<CudaSharedMemoryStatusResponse>, Status> {
        let name = request.into_inner().name;
        if !name.is_empty() {
            return Err(Status::not_found(format!(
                "Unable to find cuda shared memory region: '{name}'"
            )));
        }
        Ok(Response::new(CudaSharedMemoryStatusResponse::default()))
    }

    async fn cuda_shared_memory_register(
        &self,
        request: Request<CudaSharedMemoryRegisterRequest>,
    ) -> Result<Response<CudaSharedMemoryRegisterResponse>, Status> {
        let name = request.into_inner().name;
        Err(Status::invalid_argument(format!(
            "failed to register CUDA shared memory region: '{name}', GPUs not supported"
        )))
    }

    async fn cuda_shared_memory_unregister(
        &self,
        _: Request<CudaSharedMemoryUnregisterRequest>,
    ) -> Result<Response<CudaSharedMemoryUnregisterResponse>, Status> {
        Ok(Response::new(CudaSharedMemoryUnregisterResponse {}))
    }

    async fn trace_setting(
        &self,
        request: Request<TraceSettingRequest>,
    ) -> Result<Response<TraceSettingResponse>, Status> {
        let request = request.into_inner();
        let model = &request.model_name;
        if !model.is_empty()
            && !self
                .state
                .find(model)
                .is_some_and(|i| self.state.is_loaded(i))
        {
            return Err(Status::invalid_argument(format!(
                "Request for unknown model : {model}"
            )));
        }
        if request.settings.contains_key("trace_file") {
            return Err(Status::unimplemented(
                "trace file location can not be updated through network protocol",
            ));
        }
        // Updates are accepted and ignored: tracing is always off here.
        let defaults = [
            ("trace_level", "OFF"),
            ("trace_rate", "1000"),
            ("trace_count", "-1"),
            ("log_frequency", "0"),
            ("trace_file", ""),
            ("trace_mode", "triton"),
        ];
        let settings = defaults
            .iter()
            .map(|(key, value)| {
                let value = trace_setting_response::SettingValue {
                    value: vec![value.to_string()],
                };
                (key.to_string(), value)
            })
            .collect();
        Ok(Response::new(TraceSettingResponse { settings }))
    }

    async fn log_settings(
        &self,
        request: Request<LogSettingsRequest>,
    ) -> Result<Response<LogSettingsResponse>, Status> {
        use log_settings_response::setting_value::ParameterChoice as Setting;
        if request.into_inner().settings.contains_key("log_file") {
            return Err(Status::unimplemented(
                "log file location can not be updated through network protocol",
            ));
        }
        // Updates are accepted and ignored: the demo does not log per request.
        let defaults = [
            ("log_file", Setting::StringParam(String::new())),
            ("log_info", Setting::BoolParam(true)),
            ("log_warning", Setting::BoolParam(true)),
            ("log_error", Setting::BoolParam(true)),
            ("log_verbose_level", Setting::Uint32Param(0)),
            ("log_format", Setting::StringParam("default".to_owned())),
        ];
        let settings = defaults
            .into_iter()
            .map(|(key, choice)| {
                let value = log_settings_response::SettingValue {
                    parameter_choice: Some(choice),
                };
                (key.to_owned(), value)
            })
            .collect();
        Ok(Response::new(LogSettingsResponse { settings }))
    }
}

/// `grpc.health.v1.Health`: the demo is always live.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HealthService;

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(
        &self,
        _: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        Ok(Response::new(HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }))
    }
}

//! The upstream calls of the v1 front, one small function per RPC (so the
//! upstream pool can take them over mechanically).

use crate::error::{Error, Result};
use crate::front::handler::Gateway;
use crate::model::{InferRequest, InferResponse};
use crate::proto::inference as pb;
use crate::translate::{from_grpc, to_grpc};

fn status(s: tonic::Status) -> Error {
    Error::from_status(&s)
}

impl Gateway {
    pub(super) async fn v1_server_live(&self) -> Result<bool> {
        let mut client = self.upstream.client().map_err(status)?;
        let r = client.server_live(self.upstream.request(pb::ServerLiveRequest {}));
        Ok(r.await.map_err(status)?.into_inner().live)
    }

    pub(super) async fn v1_server_ready(&self) -> Result<bool> {
        let mut client = self.upstream.client().map_err(status)?;
        let r = client.server_ready(self.upstream.request(pb::ServerReadyRequest {}));
        Ok(r.await.map_err(status)?.into_inner().ready)
    }

    /// Every model and version the repository knows; `None` when the
    /// upstream has no repository API.
    pub(super) async fn v1_repository_index(
        &self,
    ) -> Result<Option<Vec<pb::repository_index_response::ModelIndex>>> {
        let mut client = self.upstream.client().map_err(status)?;
        let request = pb::RepositoryIndexRequest {
            repository_name: String::new(),
            ready: false,
        };
        match client
            .repository_index(self.upstream.request(request))
            .await
        {
            Ok(r) => Ok(Some(r.into_inner().models)),
            Err(s) if s.code() == tonic::Code::Unimplemented => Ok(None),
            Err(s) => Err(status(s)),
        }
    }

    pub(super) async fn v1_model_config(&self, name: &str) -> Result<pb::ModelConfig> {
        let mut client = self.upstream.client().map_err(status)?;
        let request = pb::ModelConfigRequest {
            name: name.to_string(),
            version: String::new(),
        };
        let r = client.model_config(self.upstream.request(request)).await;
        Ok(r.map_err(status)?.into_inner().config.unwrap_or_default())
    }

    pub(super) async fn v1_model_versions(&self, name: &str) -> Result<Vec<String>> {
        let mut client = self.upstream.client().map_err(status)?;
        let request = pb::ModelMetadataRequest {
            name: name.to_string(),
            version: String::new(),
        };
        let r = client.model_metadata(self.upstream.request(request)).await;
        Ok(r.map_err(status)?.into_inner().versions)
    }

    pub(super) async fn v1_model_ready(&self, name: &str, version: &str) -> Result<bool> {
        let mut client = self.upstream.client().map_err(status)?;
        let request = pb::ModelReadyRequest {
            name: name.to_string(),
            version: version.to_string(),
        };
        let r = client.model_ready(self.upstream.request(request)).await;
        Ok(r.map_err(status)?.into_inner().ready)
    }

    pub(super) async fn v1_model_statistics(&self, name: &str) -> Result<Vec<pb::ModelStatistics>> {
        let mut client = self.upstream.client().map_err(status)?;
        let request = pb::ModelStatisticsRequest {
            name: name.to_string(),
            version: String::new(),
        };
        let r = client
            .model_statistics(self.upstream.request(request))
            .await;
        Ok(r.map_err(status)?.into_inner().model_stats)
    }

    pub(super) async fn v1_model_infer(&self, request: &InferRequest) -> Result<InferResponse> {
        let mut client = self.upstream.client().map_err(status)?;
        let message = to_grpc::model_infer(request);
        let r = client.model_infer(self.upstream.request(message)).await;
        Ok(from_grpc::model_infer(
            r.map_err(status)?.into_inner(),
            &request.id,
        ))
    }

    pub(super) async fn v1_model_load(&self, name: &str) -> Result<()> {
        let mut client = self.upstream.client().map_err(status)?;
        let request = pb::RepositoryModelLoadRequest {
            repository_name: String::new(),
            model_name: name.to_string(),
            parameters: Default::default(),
        };
        let r = client
            .repository_model_load(self.upstream.request(request))
            .await;
        r.map_err(status).map(drop)
    }

    pub(super) async fn v1_model_unload(&self, name: &str) -> Result<()> {
        let mut client = self.upstream.client().map_err(status)?;
        let request = pb::RepositoryModelUnloadRequest {
            repository_name: String::new(),
            model_name: name.to_string(),
            parameters: Default::default(),
        };
        let r = client
            .repository_model_unload(self.upstream.request(request))
            .await;
        r.map_err(status).map(drop)
    }
}

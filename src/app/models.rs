//! Model signatures (datatypes, shapes, decoupled policy) as every front
//! needs them: from the cache, or asked of the upstream once.

use std::sync::Arc;

use crate::app::door::{self, Aim};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Kind, Result};
use crate::model::{ModelInfo, ModelRef};
use crate::translate::from_grpc;

/// Model signature from the cache, or `ModelConfig` upstream (falling
/// back to `ModelMetadata` for servers without it, such as KServe: a
/// backend that lacks `ModelConfig` is not asked for it again, see
/// `upstream::OptionalRpc`). `Ok(None)` when the upstream offers
/// neither; unknown models are the upstream's 404.
pub(crate) async fn model_info(
    gateway: &Gateway,
    ctx: &RequestContext,
    model: &ModelRef,
) -> Result<Option<Arc<ModelInfo>>> {
    if let Some(info) = gateway.models().get(&model.name, &model.version) {
        return Ok(Some(info));
    }
    let aim = Aim::model(&model.name);
    let request = crate::proto::inference::ModelConfigRequest {
        name: model.name.clone(),
        version: model.version.clone(),
    };
    let info = match door::call(gateway, ctx, aim, request).await {
        Ok(r) => from_grpc::model_info_from_config(r.config.unwrap_or_default()),
        Err(e) if e.kind == Kind::MissingRpc => {
            let request = crate::proto::inference::ModelMetadataRequest {
                name: model.name.clone(),
                version: model.version.clone(),
            };
            match door::call(gateway, ctx, aim, request).await {
                Ok(r) => from_grpc::model_info_from_metadata(r),
                Err(e) if e.kind == Kind::MissingRpc => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    let info = Arc::new(info);
    gateway
        .models()
        .put(&model.name, &model.version, info.clone());
    Ok(Some(info))
}

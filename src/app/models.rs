//! Model signatures (datatypes, shapes, decoupled policy) as every front
//! needs them: from the cache of the group the model's route goes to, or
//! asked of that group once.

use std::sync::Arc;

use crate::app::door::{self, Aim};
use crate::app::routing::Routed;
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::{Kind, Result};
use crate::model::{ModelInfo, ModelRef};
use crate::translate::from_grpc;

/// Model signature from the cache, or `ModelConfig` upstream (falling
/// back to `ModelMetadata` for servers without it, such as KServe: a
/// backend that lacks `ModelConfig` is not asked for it again, see
/// `upstream::OptionalRpc`). `Ok(None)` when the upstream offers
/// neither; unknown models are the upstream's 404. `routed`: the route
/// the request took already (`None`: routed here); the signature is
/// cached per group, under the model's name there.
pub(crate) async fn model_info(
    gateway: &Gateway,
    ctx: &RequestContext,
    model: &ModelRef,
    routed: Option<&Routed>,
) -> Result<Option<Arc<ModelInfo>>> {
    let aim = Aim::of(model);
    let routed = match routed {
        Some(routed) => routed.clone(),
        None => door::route(gateway, ctx, &aim)?,
    };
    let cache = &routed.group.models;
    let upstream_name = routed.model(&model.name);
    if let Some(info) = cache.get(upstream_name, &model.version) {
        return Ok(Some(info));
    }
    let aim = aim.on(&routed);
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
    cache.put(upstream_name, &model.version, info.clone());
    Ok(Some(info))
}

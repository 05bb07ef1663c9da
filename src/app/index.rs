//! The repository index over the upstream groups: every group clients'
//! calls reach is asked for its index, and the entries are listed group by
//! group, each with its group's name. A model a rule renames is listed
//! under the client's name for it (the rule's own names, where they are
//! names rather than patterns), so the upstream's name never shows. A
//! group that fails is left out (and logged) while another answers; if
//! none does, the first group's error is the answer. With one group, its
//! answer is the index as it came.

use std::sync::Arc;

use crate::app::door::{self, Aim, Relay};
use crate::app::Gateway;
use crate::context::RequestContext;
use crate::error::Result;
use crate::proto::inference as pb;

/// One group's index.
pub(crate) struct Listed {
    pub(crate) group: Arc<str>,
    pub(crate) index: pb::RepositoryIndexResponse,
}

/// The index of every group clients' calls reach, in group-name order.
/// `relay`: a client's call passed on (its deadline and metadata); `None`:
/// the gateway's own.
pub(crate) async fn repository_index(
    gateway: &Gateway,
    ctx: &RequestContext,
    request: &pb::RepositoryIndexRequest,
    relay: Option<&Relay>,
) -> Result<Vec<Listed>> {
    let routing = gateway.routing();
    let routes = routing.serving_routes();
    let mut listed = Vec::with_capacity(routes.len());
    let mut failed = None;
    for routed in &routes {
        let aim = Aim::ANY.on(routed);
        let answer = match relay {
            Some(relay) => door::relay(gateway, ctx, aim, relay, request.clone())
                .await
                .map(tonic::Response::into_inner),
            None => door::call(gateway, ctx, aim, request.clone()).await,
        };
        let mut index = match answer {
            Ok(index) => index,
            Err(error) => {
                tracing::warn!(group = %routed.group.name, %error, "a group's repository index failed; listed without it");
                failed.get_or_insert(error);
                continue;
            }
        };
        for (client, upstream, groups) in routing.renames() {
            if groups.iter().any(|g| Arc::ptr_eq(g, &routed.group)) {
                for model in index.models.iter_mut().filter(|m| m.name == upstream) {
                    client.clone_into(&mut model.name);
                }
            }
        }
        listed.push(Listed {
            group: routed.group.name.clone(),
            index,
        });
    }
    match failed {
        Some(error) if listed.is_empty() => Err(error),
        _ => Ok(listed),
    }
}

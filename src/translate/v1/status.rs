//! A v1 `ServerStatus` from what a v2 upstream reports: each model's
//! `ModelConfig` converted to the v1 schema (same field numbers; BF16, which
//! v1 lacks, becomes `TYPE_INVALID`; the backend name stands in for an
//! empty platform), its versions' readiness from the repository index, and
//! its statistics (execution and inference counts, last inference, and per
//! batch size the compute time as `success` and `compute`).

use std::collections::HashMap;

use crate::proto::inference as v2;
use crate::proto::v1 as pb;

/// What the gateway learnt about one model.
#[derive(Debug, Clone, Default)]
pub(crate) struct ModelFacts {
    pub config: v2::ModelConfig,
    /// Versions with their v2 state (`READY`, `UNAVAILABLE`, ...) and reason.
    pub versions: Vec<(i64, String, String)>,
    pub stats: Vec<v2::ModelStatistics>,
}

pub(crate) fn server_status(
    server_id: &str,
    ready: bool,
    uptime_ns: u64,
    models: Vec<ModelFacts>,
) -> pb::ServerStatus {
    let model_status = models
        .into_iter()
        .map(|m| (m.config.name.clone(), model_status(m)))
        .collect();
    pb::ServerStatus {
        id: server_id.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        ready_state: if ready {
            pb::ServerReadyState::ServerReady
        } else {
            pb::ServerReadyState::ServerInitializing
        } as i32,
        uptime_ns,
        model_status,
        ..Default::default()
    }
}

fn model_status(facts: ModelFacts) -> pb::ModelStatus {
    let mut version_status: HashMap<i64, pb::ModelVersionStatus> = facts
        .versions
        .iter()
        .map(|(version, state, reason)| {
            let status = pb::ModelVersionStatus {
                ready_state: ready_state(state) as i32,
                ready_state_reason: (!reason.is_empty()).then(|| pb::ModelReadyStateReason {
                    message: reason.clone(),
                }),
                ..Default::default()
            };
            (*version, status)
        })
        .collect();
    for stats in &facts.stats {
        if let Some(status) = stats
            .version
            .parse()
            .ok()
            .and_then(|v: i64| version_status.get_mut(&v))
        {
            add_stats(status, stats);
        }
    }
    pb::ModelStatus {
        config: Some(model_config(&facts.config)),
        version_status,
    }
}

/// The v2 repository index's state names (v2 §1.4).
pub(crate) fn ready_state(state: &str) -> pb::ModelReadyState {
    match state {
        "READY" => pb::ModelReadyState::ModelReady,
        "UNAVAILABLE" => pb::ModelReadyState::ModelUnavailable,
        "LOADING" => pb::ModelReadyState::ModelLoading,
        "UNLOADING" => pb::ModelReadyState::ModelUnloading,
        _ => pb::ModelReadyState::ModelUnknown,
    }
}

fn add_stats(status: &mut pb::ModelVersionStatus, stats: &v2::ModelStatistics) {
    status.model_execution_count = stats.execution_count;
    status.model_inference_count = stats.inference_count;
    status.last_inference_timestamp_milliseconds = stats.last_inference;
    let duration =
        |d: &Option<v2::StatisticDuration>| d.as_ref().map_or((0, 0), |d| (d.count, d.ns));
    for batch in &stats.batch_stats {
        let (count, infer_ns) = duration(&batch.compute_infer);
        let total_ns = infer_ns
            .saturating_add(duration(&batch.compute_input).1)
            .saturating_add(duration(&batch.compute_output).1);
        let stat = |ns| {
            Some(pb::StatDuration {
                count,
                total_time_ns: ns,
            })
        };
        let key = u32::try_from(batch.batch_size).unwrap_or(u32::MAX);
        status.infer_stats.insert(
            key,
            pb::InferRequestStats {
                success: stat(infer_ns),
                compute: stat(total_ns),
                ..Default::default()
            },
        );
    }
}

/// v2 `ModelConfig` → v1 `ModelConfig`, field by field.
pub(crate) fn model_config(c: &v2::ModelConfig) -> pb::ModelConfig {
    use pb::model_version_policy as policy;
    use v2::model_version_policy::PolicyChoice as V2Policy;
    let version_policy = c.version_policy.as_ref().map(|p| pb::ModelVersionPolicy {
        policy_choice: p.policy_choice.as_ref().map(|choice| match choice {
            V2Policy::Latest(l) => policy::PolicyChoice::Latest(policy::Latest {
                num_versions: l.num_versions,
            }),
            V2Policy::All(_) => policy::PolicyChoice::All(policy::All {}),
            V2Policy::Specific(s) => policy::PolicyChoice::Specific(policy::Specific {
                versions: s.versions.clone(),
            }),
        }),
    });
    let reshape = |r: &Option<v2::ModelTensorReshape>| {
        r.as_ref().map(|r| pb::ModelTensorReshape {
            shape: r.shape.clone(),
        })
    };
    let scheduling_choice = match &c.scheduling_choice {
        Some(v2::model_config::SchedulingChoice::DynamicBatching(d)) => Some(
            pb::model_config::SchedulingChoice::DynamicBatching(pb::ModelDynamicBatching {
                preferred_batch_size: d.preferred_batch_size.clone(),
                max_queue_delay_microseconds: d.max_queue_delay_microseconds,
                preserve_ordering: d.preserve_ordering,
            }),
        ),
        _ => None,
    };
    pb::ModelConfig {
        name: c.name.clone(),
        platform: if c.platform.is_empty() {
            c.backend.clone()
        } else {
            c.platform.clone()
        },
        version_policy,
        max_batch_size: c.max_batch_size,
        input: c
            .input
            .iter()
            .map(|i| pb::ModelInput {
                name: i.name.clone(),
                data_type: data_type(i.data_type),
                format: i.format,
                dims: i.dims.clone(),
                reshape: reshape(&i.reshape),
                is_shape_tensor: i.is_shape_tensor,
                allow_ragged_batch: i.allow_ragged_batch,
            })
            .collect(),
        output: c
            .output
            .iter()
            .map(|o| pb::ModelOutput {
                name: o.name.clone(),
                data_type: data_type(o.data_type),
                dims: o.dims.clone(),
                reshape: reshape(&o.reshape),
                label_filename: o.label_filename.clone(),
                is_shape_tensor: o.is_shape_tensor,
            })
            .collect(),
        scheduling_choice,
        instance_group: c
            .instance_group
            .iter()
            .map(|g| pb::ModelInstanceGroup {
                name: g.name.clone(),
                kind: g.kind,
                count: g.count,
                gpus: g.gpus.clone(),
                profile: g.profile.clone(),
            })
            .collect(),
        default_model_filename: c.default_model_filename.clone(),
        cc_model_filenames: c.cc_model_filenames.clone(),
        metric_tags: c.metric_tags.clone(),
        parameters: c
            .parameters
            .iter()
            .map(|(k, v)| {
                let value = pb::ModelParameter {
                    string_value: v.string_value.clone(),
                };
                (k.clone(), value)
            })
            .collect(),
    }
}

/// Same numbers in both schemas up to TYPE_STRING; BF16 has no v1 type.
fn data_type(v2_type: i32) -> i32 {
    match pb::DataType::try_from(v2_type) {
        Ok(t) => t as i32,
        Err(_) => pb::DataType::TypeInvalid as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_config() -> v2::ModelConfig {
        v2::ModelConfig {
            name: "simple".into(),
            backend: "python".into(),
            max_batch_size: 8,
            version_policy: Some(v2::ModelVersionPolicy {
                policy_choice: Some(v2::model_version_policy::PolicyChoice::Latest(
                    v2::model_version_policy::Latest { num_versions: 1 },
                )),
            }),
            input: vec![v2::ModelInput {
                name: "INPUT0".into(),
                data_type: v2::DataType::TypeInt32 as i32,
                dims: vec![16],
                ..Default::default()
            }],
            output: vec![v2::ModelOutput {
                name: "OUTPUT0".into(),
                data_type: v2::DataType::TypeBf16 as i32,
                dims: vec![-1],
                label_filename: "labels.txt".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn config_keeps_the_fields_a_v1_client_reads() {
        let c = model_config(&v2_config());
        assert_eq!(c.platform, "python");
        assert_eq!(c.max_batch_size, 8);
        assert_eq!(c.input[0].data_type, pb::DataType::TypeInt32 as i32);
        assert_eq!(c.input[0].dims, [16]);
        assert_eq!(c.output[0].data_type, pb::DataType::TypeInvalid as i32);
        assert_eq!(c.output[0].label_filename, "labels.txt");
        assert!(c.version_policy.is_some());
    }

    #[test]
    fn versions_and_statistics() {
        let stats = v2::ModelStatistics {
            name: "simple".into(),
            version: "1".into(),
            execution_count: 3,
            inference_count: 5,
            batch_stats: vec![v2::InferBatchStatistics {
                batch_size: 2,
                compute_infer: Some(v2::StatisticDuration { count: 1, ns: 10 }),
                compute_input: Some(v2::StatisticDuration { count: 1, ns: 5 }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let facts = ModelFacts {
            config: v2_config(),
            versions: vec![
                (1, "READY".into(), String::new()),
                (2, "UNAVAILABLE".into(), "unloaded".into()),
            ],
            stats: vec![stats],
        };
        let status = server_status("inference:0", true, 1, vec![facts]);
        assert_eq!(status.ready_state, pb::ServerReadyState::ServerReady as i32);
        let model = &status.model_status["simple"];
        let v1 = &model.version_status[&1];
        assert_eq!(v1.ready_state, pb::ModelReadyState::ModelReady as i32);
        assert_eq!((v1.model_execution_count, v1.model_inference_count), (3, 5));
        let batch2 = &v1.infer_stats[&2];
        assert_eq!(batch2.success.as_ref().map(|d| d.total_time_ns), Some(10));
        assert_eq!(batch2.compute.as_ref().map(|d| d.total_time_ns), Some(15));
        let v2_status = &model.version_status[&2];
        assert_eq!(
            v2_status
                .ready_state_reason
                .as_ref()
                .map(|r| r.message.as_str()),
            Some("unloaded")
        );
    }
}

//! `DefaultBinder`: binds a decision by one write of the Application's `binding` subresource
//! through the application layer (so admission sees it), which sets `spec.placement.nodeName`,
//! the scheduled-by annotation and `Scheduled=True` together, on the version decided on, as
//! kube-scheduler's `DefaultBinder` posts `pods/binding`.

use kayra_api::kinds::application::{SCHEDULER, scheduled_by_annotation};
use kayra_application::client::Client;
use kayra_registry::Object;
use serde_json::json;

use crate::SchedulerError;
use crate::framework::Bind;
use crate::model::AppInfo;

/// Writes the `binding` subresource as the scheduler's client.
pub struct DefaultBinder {
    client: Client,
    /// The scheduled-by annotation's key.
    annotation: String,
}

impl std::fmt::Debug for DefaultBinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultBinder").finish_non_exhaustive()
    }
}

impl DefaultBinder {
    /// The binder writing as `client`.
    pub fn new(client: Client) -> DefaultBinder {
        let annotation = scheduled_by_annotation(client.layer().scheme().domain());
        DefaultBinder { client, annotation }
    }
}

#[async_trait::async_trait]
impl Bind for DefaultBinder {
    fn name(&self) -> &'static str {
        "DefaultBinder"
    }

    async fn bind(&self, app: &AppInfo, node: &str) -> Option<Result<Object, SchedulerError>> {
        let mut annotations = serde_json::Map::new();
        annotations.insert(self.annotation.clone(), json!(SCHEDULER));
        let binding =
            kayra_application::binding::binding_to(&app.name, node, Some(&app.resource_version), annotations);
        let bound = self.client.bind(&app.namespace, &app.name, &binding).await;
        Some(bound.map_err(|source| SchedulerError::Bind {
            app: app.id.clone(),
            node: node.to_owned(),
            source: Box::new(source),
        }))
    }
}

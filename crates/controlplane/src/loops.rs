//! The controller's loops, each on the loop runtime: those that write run only while this
//! replica leads their election; the RBAC index runs on every replica, since each decides its
//! own requests.

use std::sync::Arc;
use std::time::Duration;

use kayra_application::events::Recorder;
use kayra_application::loops::bootstrap::BootstrapReconciler;
use kayra_application::loops::namespaces::{FinalizerReconciler, NamespaceContent};
use kayra_application::loops::rbac::IndexReconciler;
use kayra_loop::election::Election;
use kayra_loop::runtime::Loop;
use kayra_nodecsr::reconciler::NodeCsrReconciler;

use crate::ControlPlaneError;
use crate::assemble::ControlPlane;
use crate::bridges;
use crate::config::{Config, SchedulerPolicy};
use crate::pki::read_ca;

/// How long a stopping controller waits for its loops' in-flight reconciles.
const LOOP_DRAIN: Duration = Duration::from_secs(10);

/// How long a crashed replica's loops keep the others waiting.
const ELECTION_TTL: Duration = Duration::from_secs(15);

/// Every loop of the controller, ready to run.
pub(crate) fn loops(config: &Config, control_plane: &ControlPlane) -> Result<Vec<Loop>, ControlPlaneError> {
    let application = &control_plane.application;
    let client = |component: &str| application.client(kayra_application::controller_identity(component));
    let candidate = format!("{}-{}", std::process::id(), uuid::Uuid::new_v4());
    let election = |name: &str| {
        Election::new(
            control_plane.store.clone(),
            format!("/registry/elections/{name}"),
            candidate.clone(),
            ELECTION_TTL,
        )
    };
    let registry = |what: &str| ControlPlaneError::registry(format!("start the {what} loop"));
    let fetcher = Arc::new(kayra_client::gateway::Http::new().map_err(ControlPlaneError::HttpClient)?);
    let events = Recorder::new(client("catalog-reconciler"), "kayra-catalog-reconciler");
    let subscriptions: Arc<dyn NamespaceContent> =
        Arc::new(bridges::Subscriptions(control_plane.catalog.clone()));
    let ca = read_ca(&config.data_dir)?;
    let loops = vec![
        IndexReconciler::new(client("rbac-index")).map_err(registry("RBAC index"))?.into_loop(),
        BootstrapReconciler::new(client("bootstrap-roles")).into_loop().elected(election("bootstrap-roles")),
        FinalizerReconciler::new(client("namespace-finalizer"), vec![subscriptions])
            .map_err(registry("namespace finalizer"))?
            .into_loop()
            .elected(election("namespace-finalizer")),
        NodeCsrReconciler::new(client("node-csr-signer"), Arc::new(bridges::CaSigner(ca)))?
            .into_loop()
            .elected(election("node-csr-signer")),
        kayra_catalog::reconciler::Reconciler::new(
            control_plane.catalog.clone(),
            config.reconciler.clone(),
            fetcher.clone(),
            fetcher,
            Arc::new(bridges::CoreEvents(events)),
        )
        .into_loop(candidate.clone()),
        control_plane.nodes.push_loop(),
        kayra_scheduler::Scheduler::with_framework(
            client("scheduler"),
            kayra_scheduler::Framework::new(
                match config.scheduler.policy {
                    SchedulerPolicy::Spread => kayra_scheduler::Policy::Spread,
                    SchedulerPolicy::Binpack => kayra_scheduler::Policy::Binpack,
                },
                // A node's status carries its heartbeat only every few minutes (its Lease
                // carries it between): the scheduler trusts `Ready`, which the liveness loop
                // turns `Unknown` once the Lease goes stale, as kube-scheduler does.
                None,
            ),
        )?
        .with_metrics(control_plane.scheduler_metrics.clone())
        .into_loop()
        .elected(election("scheduler")),
        kayra_gc::reconciler::GarbageCollector::new(client("garbage-collector"))
            .map_err(registry("garbage collector"))?
            .with_metrics(control_plane.gc_metrics.clone())
            .into_loop()
            .elected(election("garbage-collector")),
        kayra_gc::node_leases::NodeLeaseCollector::new(client("garbage-collector"))
            .map_err(registry("node Lease collector"))?
            .with_metrics(control_plane.gc_metrics.clone())
            .into_loop()
            .elected(election("node-lease-collector")),
        kayra_endpoints::reconciler::EndpointsReconciler::new(client("endpoints"))
            .map_err(registry("endpoints"))?
            .into_loop()
            .elected(election("endpoints")),
        kayra_appset::reconciler::SetLoop::new(client("appset"))
            .map_err(registry("ApplicationSet"))?
            .into_loop()
            .elected(election("appset")),
        control_plane.nodes.liveness_loop().elected(election("node-liveness")),
        control_plane.nodes.loss_loop().elected(election("node-loss")),
    ];
    Ok(loops.into_iter().map(|lp| lp.metrics(&control_plane.metrics).drain_deadline(LOOP_DRAIN)).collect())
}

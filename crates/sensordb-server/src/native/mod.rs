//! The native transactional TCP protocol (in progress: the listener accepts nothing yet).

use crate::server::{ServerState, ShutdownSignal};
use std::sync::Arc;
use tokio::net::TcpListener;

pub async fn serve(listener: TcpListener, state: Arc<ServerState>, mut shutdown: ShutdownSignal) {
    let _ = (&listener, &state);
    let _ = shutdown.changed().await;
}

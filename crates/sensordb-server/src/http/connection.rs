//! HTTP connections from accept to close, and the time limits that close them.
//!
//! The accept loop takes a `connections` permit for each connection it accepts, and accepts no
//! other until it has one (excess clients wait in the kernel's accept queue); a listener waiting
//! for clients holds no permit, so it takes no slot from the other listener. Each connection is
//! served in a task of its own with hyper's HTTP/1.1 server over the router; the permit is freed
//! when the connection's stream is dropped. On the shutdown signal it stops accepting, asks every
//! connection to finish its request in progress and close (hyper's graceful shutdown), and waits
//! for them.
//!
//! # Time limits
//!
//! A connection is always in one of three phases:
//!
//! | phase | from → to | limit | when it runs out |
//! |---|---|---|---|
//! | idle | accept, or the end of the last response → the first byte of a request | `idle_timeout_ms` | closed; `sensordb_connections_closed_idle_total` |
//! | head | the first byte of a request → the end of its headers | `http_header_read_timeout_ms` | closed, no answer; `sensordb_http_header_timeouts_total` |
//! | request | the end of the headers → the end of the response | none for the handler; its body must keep coming ([`super::body_deadline`]) | 400, then closed; `sensordb_http_body_timeouts_total` |
//!
//! A request in progress is never cut for taking long, whatever the handler waits for
//! (in-flight byte permits, a durable engine write). A TLS handshake runs in the idle phase,
//! under its own limit too ([`crate::tls::HANDSHAKE_TIMEOUT`]).
//!
//! Hyper's own `header_read_timeout` is off: in hyper 1.x it starts as soon as a connection
//! waits for a request, so it is an idle limit and a header limit in one (hyperium/hyper#1628
//! asks for a separate idle timeout). The phases here are those of Go's net/http
//! (`IdleTimeout`, `ReadHeaderTimeout`) and Envoy.
//!
//! The connection's task runs hyper's connection future beside a timer at the current phase's
//! deadline; when the timer wins, the connection future is dropped, which closes the socket and
//! frees the permit. The phase changes in three places: the stream (`ConnectionStream`) notes
//! the first byte read while idle; the service (`ConnectionService`) marks where a request
//! starts (hyper calls it once the headers are read) and where it ends (its response body is
//! dropped, once hyper has sent it or given up). These changes happen inside the connection's
//! poll, after which the task re-arms the timer (`UntilDeadlineMoves`); a change made anywhere
//! else wakes the task to do so.

use super::body_deadline::{BodyDeadline, BodyLimits};
use super::{router, HttpState};
use crate::metrics::Metrics;
use crate::state::{ServerState, ShutdownSignal};
use crate::tls::MaybeTlsStream;
use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Serves the HTTP API on `listener` until `shutdown` turns true, then drains.
pub async fn serve(listener: TcpListener, state: Arc<ServerState>, mut shutdown: ShutdownSignal) {
    let http = Arc::new(HttpState::new(state.clone()));
    let service = TowerToHyperService::new(router(http));
    let mut connections = JoinSet::new();
    'accept: loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopping(&mut shutdown) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        // No more accepts until this connection has its slot: excess clients wait in the
        // kernel's accept queue.
        let permit = loop {
            tokio::select! {
                permit = state.connections.clone().acquire_owned() => match permit {
                    Ok(permit) => break permit,
                    Err(_) => break 'accept,
                },
                _ = stopping(&mut shutdown) => break 'accept,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        };
        connections.spawn(serve_connection(stream, peer, permit, state.clone(), service.clone(), shutdown.clone()));
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Returns once the server is shutting down (or its handle is gone).
async fn stopping(shutdown: &mut ShutdownSignal) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

type Router = TowerToHyperService<axum::Router>;

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    state: Arc<ServerState>,
    router: Router,
    mut shutdown: ShutdownSignal,
) {
    let _ = stream.set_nodelay(true);
    let stream = match &state.tls {
        Some(tls) => MaybeTlsStream::Tls(tls.accept_lazily(stream)),
        None => MaybeTlsStream::Plain(stream),
    };
    let limits = PhaseLimits {
        idle: Duration::from_millis(state.config.idle_timeout_ms.max(1)),
        head: Duration::from_millis(state.config.http_header_read_timeout_ms.max(1)),
    };
    let activity = Arc::new(Activity::new());
    let io = ConnectionStream::new(stream, permit, state.clone(), activity.clone());
    let service =
        ConnectionService { router, activity: activity.clone(), body: BodyLimits::from_config(&state.config), state: state.clone() };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Off: the phases below keep the idle and head limits apart (see the module comment).
    builder.header_read_timeout(None);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let timer = tokio::time::sleep(limits.idle);
    tokio::pin!(timer);
    let mut draining = false;
    let result = loop {
        let deadline = activity.deadline(&limits);
        if let Some((at, _)) = deadline {
            if timer.deadline() != at {
                timer.as_mut().reset(at);
            }
        }
        tokio::select! {
            polled = UntilDeadlineMoves { connection: connection.as_mut(), activity: &activity, limits: &limits, armed: deadline } => {
                match polled {
                    Some(result) => break result,
                    None => continue,
                }
            }
            _ = activity.changed.notified() => {}
            _ = timer.as_mut(), if deadline.is_some() => {
                // The phase may have changed since the timer was armed: only a deadline that
                // still holds closes the connection.
                let Some((at, limit)) = activity.deadline(&limits) else { continue };
                if at > Instant::now() {
                    continue;
                }
                let metrics = &state.metrics;
                match limit {
                    Limit::Idle => Metrics::add(&metrics.connections_closed_idle, 1),
                    Limit::Head => Metrics::add(&metrics.http_header_timeouts, 1),
                }
                tracing::debug!(%peer, ?limit, "closing an HTTP connection: time is up");
                return;
            }
            _ = stopping(&mut shutdown), if !draining => {
                draining = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, %peer, "HTTP connection ended with an error");
    }
}

/// Polls a connection, and ends without its result when the poll moved the connection's
/// deadline, so the task's loop re-arms its timer at once.
///
/// Phases change inside the connection's own poll (bytes read, a request handed to the service,
/// a response body dropped by hyper). Waking the task from there through [`Activity::changed`]
/// would be a wake of a task that is running, which tokio's multi-threaded scheduler answers by
/// queueing the task again and waking a parked worker to look for work: a futex wake and a second
/// thread's search twice per request (single-last-loc: 100-113 -> 93 us of server CPU a query,
/// one worker switching per query instead of both).
struct UntilDeadlineMoves<'a, F> {
    connection: Pin<&'a mut F>,
    activity: &'a Activity,
    limits: &'a PhaseLimits,
    /// The deadline the timer is armed at.
    armed: Option<(Instant, Limit)>,
}

impl<F: Future> Future for UntilDeadlineMoves<'_, F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        let this = &mut *self;
        this.activity.in_poll.store(true, Ordering::SeqCst);
        let polled = this.connection.as_mut().poll(cx);
        this.activity.in_poll.store(false, Ordering::SeqCst);
        match polled {
            Poll::Ready(result) => Poll::Ready(Some(result)),
            Poll::Pending if this.activity.deadline(this.limits) != this.armed => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Where a connection is in its life; shared by its task, stream and service.
struct Activity {
    phase: Mutex<Phase>,
    /// Set while the connection's task polls the connection: a change of phase then is seen by
    /// [`UntilDeadlineMoves`] right after the poll, and needs no wake.
    in_poll: AtomicBool,
    /// Told of a change of phase made outside the connection's poll, so the task re-arms its
    /// timer.
    changed: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity { phase: Mutex::new(Phase::idle()), in_poll: AtomicBool::new(false), changed: Notify::new() }
    }

    /// After a change of phase: wakes the task unless it is polling the connection (and so will
    /// see the change itself).
    fn phase_changed(&self) {
        if !self.in_poll.load(Ordering::SeqCst) {
            self.changed.notify_one();
        }
    }

    fn deadline(&self, limits: &PhaseLimits) -> Option<(Instant, Limit)> {
        self.phase.lock().deadline(limits)
    }

    /// Bytes came in: while idle, a request has begun.
    fn bytes_read(&self) {
        let mut phase = self.phase.lock();
        if phase.requests == 0 && phase.head_since.is_none() {
            phase.head_since = Some(Instant::now());
            drop(phase);
            self.phase_changed();
        }
    }
}

#[derive(Debug)]
struct Phase {
    /// Requests whose response is not yet sent (one at a time over HTTP/1.1).
    requests: u32,
    /// The start of the idle phase: accept, or the end of the last response.
    idle_since: Instant,
    /// The first byte of the request whose headers are being read.
    head_since: Option<Instant>,
}

/// What the limit that runs out is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    Idle,
    Head,
}

impl Phase {
    fn idle() -> Phase {
        Phase { requests: 0, idle_since: Instant::now(), head_since: None }
    }

    /// The limit waiting for the peer is under now, and when it runs out; none during a
    /// request.
    fn deadline(&self, limits: &PhaseLimits) -> Option<(Instant, Limit)> {
        if self.requests > 0 {
            return None;
        }
        Some(match self.head_since {
            Some(since) => (since + limits.head, Limit::Head),
            None => (self.idle_since + limits.idle, Limit::Idle),
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct PhaseLimits {
    idle: Duration,
    head: Duration,
}

/// Marks a request in progress until dropped.
struct RequestGuard(Arc<Activity>);

impl RequestGuard {
    fn start(activity: &Arc<Activity>) -> RequestGuard {
        let mut phase = activity.phase.lock();
        phase.requests += 1;
        phase.head_since = None;
        RequestGuard(activity.clone())
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        {
            let mut phase = self.0.phase.lock();
            phase.requests = phase.requests.saturating_sub(1);
            phase.idle_since = Instant::now();
        }
        self.0.phase_changed();
    }
}

/// The router for one connection: request bodies under [`BodyDeadline`], and each request
/// marked in progress until its response body is done.
#[derive(Clone)]
struct ConnectionService {
    router: Router,
    activity: Arc<Activity>,
    body: BodyLimits,
    state: Arc<ServerState>,
}

impl hyper::service::Service<Request<Incoming>> for ConnectionService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let guard = RequestGuard::start(&self.activity);
        let request = request.map(|body| BodyDeadline::new(body, self.body, self.state.clone()));
        let response = self.router.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| TrackedBody { body, _request: guard }))
        })
    }
}

/// A response body that keeps its request in progress until hyper drops it.
struct TrackedBody {
    body: Body,
    _request: RequestGuard,
}

impl hyper::body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's stream: holds its `connections` permit (dropping the stream closes the
/// connection and frees the slot) and notes when bytes come in.
struct ConnectionStream {
    /// TLS when configured; its handshake runs on first use, in the connection's own task.
    stream: MaybeTlsStream<TcpStream>,
    _permit: OwnedSemaphorePermit,
    state: Arc<ServerState>,
    activity: Arc<Activity>,
}

impl ConnectionStream {
    fn new(
        stream: MaybeTlsStream<TcpStream>,
        permit: OwnedSemaphorePermit,
        state: Arc<ServerState>,
        activity: Arc<Activity>,
    ) -> ConnectionStream {
        Metrics::add(&state.metrics.connections_accepted, 1);
        state.metrics.connections_open.fetch_add(1, Ordering::Relaxed);
        ConnectionStream { stream, _permit: permit, state, activity }
    }
}

impl Drop for ConnectionStream {
    fn drop(&mut self) {
        self.state.metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl AsyncRead for ConnectionStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.bytes_read();
        }
        result
    }
}

impl AsyncWrite for ConnectionStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_has_its_own_deadline() {
        let limits = PhaseLimits { idle: Duration::from_secs(60), head: Duration::from_secs(20) };
        let activity = Arc::new(Activity::new());
        let start = activity.phase.lock().idle_since;
        assert_eq!(activity.deadline(&limits), Some((start + limits.idle, Limit::Idle)));
        activity.bytes_read();
        let first_byte = activity.phase.lock().head_since.expect("a request has begun");
        assert_eq!(activity.deadline(&limits), Some((first_byte + limits.head, Limit::Head)));
        activity.bytes_read();
        assert_eq!(activity.phase.lock().head_since, Some(first_byte), "the head limit runs from the first byte");
        let guard = RequestGuard::start(&activity);
        assert_eq!(activity.deadline(&limits), None, "no limit while a request runs");
        activity.bytes_read();
        assert_eq!(activity.deadline(&limits), None, "body bytes are no new request");
        drop(guard);
        let phase = activity.phase.lock();
        assert_eq!(phase.head_since, None);
        assert_eq!(phase.deadline(&limits), Some((phase.idle_since + limits.idle, Limit::Idle)));
    }

    /// A waker that counts its wakes.
    struct CountingWaker(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_phase_changed_inside_the_poll_rearms_without_waking_the_task() {
        let limits = PhaseLimits { idle: Duration::from_secs(60), head: Duration::from_secs(20) };
        let activity = Arc::new(Activity::new());
        let wakes = Arc::new(CountingWaker(Default::default()));
        let waker = std::task::Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        // The connection reads the first bytes of a request and waits for more.
        let mut connection = std::pin::pin!(std::future::poll_fn(|_| {
            activity.bytes_read();
            Poll::<()>::Pending
        }));
        let armed = activity.deadline(&limits);
        let mut polled =
            std::pin::pin!(UntilDeadlineMoves { connection: connection.as_mut(), activity: &activity, limits: &limits, armed });
        assert!(matches!(polled.as_mut().poll(&mut cx), Poll::Ready(None)), "the deadline moved: the loop must re-arm");
        assert!(!activity.in_poll.load(Ordering::SeqCst));
        let mut changed = std::pin::pin!(activity.changed.notified());
        assert!(changed.as_mut().poll(&mut cx).is_pending(), "no wake was stored for a change the poll saw");
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);

        // Polled again with the new deadline armed, nothing moves: the connection just waits.
        let armed = activity.deadline(&limits);
        assert!(matches!(armed, Some((_, Limit::Head))));
        let mut polled =
            std::pin::pin!(UntilDeadlineMoves { connection: connection.as_mut(), activity: &activity, limits: &limits, armed });
        assert!(polled.as_mut().poll(&mut cx).is_pending());

        // A change made outside the poll still wakes the waiting task.
        drop(RequestGuard::start(&activity));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "the waiting task was woken");
    }
}

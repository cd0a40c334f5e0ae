//! A capsule's tools served to MCP clients (`mur mcp serve`). The protocol is the official Rust
//! SDK's; what is served, and how each call runs, is the caller's ([`Sessions`]).
//!
//! What a caller can rely on:
//!
//! - **A session per client** ([`Sessions::open`]): over stdio the one client is one session;
//!   over streamable HTTP each MCP session (`Mcp-Session-Id`) is one. A session is opened when
//!   its client first lists or calls tools, and dropped when the client goes (stdio closed, the
//!   HTTP session deleted or the server stopped). A session that cannot open is an MCP error
//!   carrying its reason; the client may try again.
//! - **Tools as the session lists them** ([`ServedTools::listing`]), each `{name,
//!   description, inputSchema}`; a call is answered with its text and `isError`, never a
//!   protocol error, so the client's model sees why a call failed.
//! - **Questions go to the client's user** ([`Elicitor`]): a call from a client that declared
//!   the elicitation capability carries one, which puts a tool's question to the user as an
//!   MCP elicitation form with one text field; a client without it cannot be asked.
//! - **HTTP only as asked** ([`serve_http`]), behind the HTTP front every Murmur server
//!   stands behind (`murmur_front`: `Host` and `Origin` checked, JSON bodies only, time
//!   limits, connection caps). With a bearer token, a request without `Authorization: Bearer
//!   <token>` (compared in constant time, its length included) is 401 before the MCP layer
//!   sees it.
//! - **Sessions bounded**: at most [`SESSIONS_PER_CLIENT`] open MCP sessions from one client
//!   address and [`SESSIONS`] in all; one more is answered 429 with a JSON-RPC error, until
//!   the client deletes one or one ends idle (after five minutes).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use crate::Called;

/// A boxed future, as the traits here return.
pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One client's session: its tools, and their calls.
pub trait ServedTools: Send + Sync + 'static {
    /// The tools offered, as MCP lists them: each `{name, description, inputSchema}`.
    fn listing(&self) -> Vec<Value>;
    /// Calls tool `name` with `arguments` (an object); `elicitor` asks the client's user when
    /// the tool asks for input (none when the client cannot be asked).
    fn call(&self, name: String, arguments: Value, elicitor: Option<Elicitor>)
    -> Boxed<'_, Called>;
}

/// Opens a session for each client.
pub trait Sessions: Send + Sync + 'static {
    /// A session for a client that has just come; `Err` says why none could open.
    fn open(&self) -> Boxed<'_, Result<Arc<dyn ServedTools>, String>>;
}

/// Asks the client's user for a reply (MCP elicitation: a form with one text field,
/// `reply`), for a tool's `request-input`.
#[derive(Clone)]
pub struct Elicitor {
    peer: rmcp::Peer<RoleServer>,
}

impl Elicitor {
    /// One for the client behind `context`, when it said it takes elicitation requests.
    fn of(context: &RequestContext<RoleServer>) -> Option<Elicitor> {
        let info = context.peer.peer_info()?;
        let info = serde_json::to_value(&*info).ok()?;
        info["capabilities"]["elicitation"]
            .is_object()
            .then(|| Elicitor {
                peer: context.peer.clone(),
            })
    }

    /// Asks `prompt` and waits for the reply; `Err` says why none came (declined, cancelled,
    /// the client gone).
    pub async fn ask(&self, prompt: String) -> Result<String, String> {
        let params = serde_json::from_value(json!({
            "mode": "form",
            "message": prompt,
            "requestedSchema": {
                "type": "object",
                "properties": { "reply": { "type": "string", "description": "Your reply" } },
                "required": ["reply"],
            },
        }))
        .map_err(|error| format!("the question could not be put: {error}"))?;
        let answer = self
            .peer
            .create_elicitation(params)
            .await
            .map_err(|error| format!("the client did not answer: {error}"))?;
        match answer.action {
            rmcp::model::ElicitationAction::Accept => answer
                .content
                .as_ref()
                .and_then(|content| content["reply"].as_str())
                .map(str::to_string)
                .ok_or_else(|| "the client's answer has no `reply`".to_string()),
            rmcp::model::ElicitationAction::Decline => Err("the user declined to answer".into()),
            rmcp::model::ElicitationAction::Cancel => Err("the user cancelled".into()),
            other => Err(format!("the client answered {other:?}")),
        }
    }
}

/// How the server introduces itself (`serverInfo`).
#[derive(Debug, Clone)]
pub struct Identity {
    pub name: String,
    pub version: String,
}

/// One client's handler: its session opened on first use.
#[derive(Clone)]
struct Handler {
    sessions: Arc<dyn Sessions>,
    identity: Identity,
    session: Arc<tokio::sync::Mutex<Option<Arc<dyn ServedTools>>>>,
}

impl Handler {
    fn new(sessions: Arc<dyn Sessions>, identity: Identity) -> Handler {
        Handler {
            sessions,
            identity,
            session: Arc::default(),
        }
    }

    /// The client's session, opened when it is first needed.
    async fn session(&self) -> Result<Arc<dyn ServedTools>, rmcp::ErrorData> {
        let mut session = self.session.lock().await;
        if let Some(open) = &*session {
            return Ok(open.clone());
        }
        let opened = self.sessions.open().await.map_err(|reason| {
            rmcp::ErrorData::internal_error(format!("the session did not open: {reason}"), None)
        })?;
        *session = Some(opened.clone());
        Ok(opened)
    }
}

impl rmcp::ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new(self.identity.name.clone(), self.identity.version.clone()),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        let session = self.session().await?;
        serde_json::from_value(json!({ "tools": session.listing() })).map_err(|error| {
            rmcp::ErrorData::internal_error(format!("a tool could not be listed: {error}"), None)
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let session = self.session().await?;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let called = session
            .call(request.name.to_string(), arguments, Elicitor::of(&context))
            .await;
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [{ "type": "text", "text": called.text }],
            "isError": called.is_error,
        }))
        .map_err(|error| rmcp::ErrorData::internal_error(error.to_string(), None))?;
        Ok(CallToolResponse::Complete(result))
    }
}

/// Serves one client on this process's stdin and stdout until it goes.
pub async fn serve_stdio(sessions: Arc<dyn Sessions>, identity: Identity) -> Result<(), String> {
    let running = Handler::new(sessions, identity)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| format!("the client's handshake failed: {error}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|error| error.to_string())
}

/// Open MCP sessions one client address may hold at once.
pub const SESSIONS_PER_CLIENT: usize = 32;
/// Open MCP sessions in all.
pub const SESSIONS: usize = 512;

/// Which client address opened each MCP session, to hold each to its share.
#[derive(Default)]
struct SessionOwners {
    owners: std::sync::Mutex<std::collections::HashMap<Arc<str>, std::net::IpAddr>>,
}

impl SessionOwners {
    /// Whether `client` may open one more session, forgetting sessions that have ended.
    async fn may_open(
        &self,
        client: std::net::IpAddr,
        manager: &rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    ) -> Result<(), String> {
        let live = manager.sessions.read().await;
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        owners.retain(|id, _| live.contains_key(id));
        let from_client = owners.values().filter(|&&owner| owner == client).count();
        if from_client >= SESSIONS_PER_CLIENT {
            return Err(format!(
                "this client has {from_client} open MCP sessions, the most one client may hold: \
                 delete one (HTTP DELETE with its Mcp-Session-Id) before opening another"
            ));
        }
        if owners.len() >= SESSIONS {
            return Err(format!(
                "this server has {} open MCP sessions, the most it holds: try again later",
                owners.len()
            ));
        }
        Ok(())
    }

    fn opened(&self, id: &str, client: std::net::IpAddr) {
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        owners.insert(Arc::from(id), client);
    }
}

/// Holds each client to its share of sessions: a request that would open one (it carries no
/// `Mcp-Session-Id`) is refused 429 past the caps; the session an answer opens is counted.
async fn hold_sessions(
    owners: Arc<SessionOwners>,
    manager: Arc<rmcp::transport::streamable_http_server::session::local::LocalSessionManager>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let client = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip());
    let opens =
        request.method() == http::Method::POST && !request.headers().contains_key("mcp-session-id");
    let Some(client) = client.filter(|_| opens) else {
        return next.run(request).await;
    };
    if let Err(why) = owners.may_open(client, &manager).await {
        use axum::response::IntoResponse;
        let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": why}});
        return (
            http::StatusCode::TOO_MANY_REQUESTS,
            [(http::header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
    }
    let response = next.run(request).await;
    if let Some(id) = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
    {
        owners.opened(id, client);
    }
    response
}

/// Serves streamable HTTP at `/mcp` on `listener` until `stop` resolves: each MCP session of a
/// client one [`Sessions::open`]; with `bearer`, only requests that carry it.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    sessions: Arc<dyn Sessions>,
    identity: Identity,
    bearer: Option<String>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let address = listener
        .local_addr()
        .map_err(|error| format!("the listener has no address: {error}"))?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(cancel.clone());
    config.legacy_session_mode = true;
    // The front checks `Host` and `Origin` for every server alike.
    config = config.disable_allowed_hosts();
    let manager = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(
        move || Ok(Handler::new(sessions.clone(), identity.clone())),
        manager.clone(),
        config,
    );
    let owners = Arc::new(SessionOwners::default());
    let mut router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(move |request, next| {
                hold_sessions(owners.clone(), manager.clone(), request, next)
            }));
    if let Some(token) = bearer {
        let token = Arc::new(token);
        router = router.layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let token = token.clone();
                async move {
                    if carries(&request, &token) {
                        next.run(request).await
                    } else {
                        unauthorized()
                    }
                }
            },
        ));
    }
    let front = murmur_front::Front::new(address, &[], &[]);
    murmur_front::serve(listener, router, front, async move {
        stop.await;
        cancel.cancel();
    })
    .await;
    Ok(())
}

/// Whether `request` carries `Authorization: Bearer <token>`, compared in constant time.
fn carries(request: &axum::extract::Request, token: &str) -> bool {
    request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(murmur_front::secret::bearer_token)
        .is_some_and(|given| murmur_front::secret::same_secret(given.as_bytes(), token.as_bytes()))
}

fn unauthorized() -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        http::StatusCode::UNAUTHORIZED,
        [(http::header::WWW_AUTHENTICATE, "Bearer")],
        "a bearer token is required\n",
    )
        .into_response()
}

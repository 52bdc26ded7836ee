//! A provider written outside llmchain, against its public traits: a company's LLM
//! gateway that speaks OpenAI Chat Completions under its own path, with its own
//! request-signing auth. It implements the `Provider` trait (name, codec, route, default
//! model, base URL; here also its auth and variables) and is given to
//! `HttpModelConfig::for_provider`; `HttpModel` does the rest (streaming, retries,
//! limits, errors). A local server stands in for the gateway.
//!
//! `cargo run -p llmchain --example custom_provider`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use llmchain::chain::{ChatModel, collect_stream};
use llmchain::conversation::Conversation;
use llmchain::http::providers::{Provider, Route, RouteContext};
use llmchain::http::reqwest::{self, header::HeaderValue};
use llmchain::http::{Auth, AuthFuture, HttpModel, HttpModelConfig};
use llmchain::message::Message;
use llmchain::model::ModelError;
use llmchain::provider::{Codec, Format};

/// The gateway's scheme: the key and what it covers (method, path, body length) in one
/// header. (A real gateway would put an HMAC of these; the hook sees the whole request.)
#[derive(Debug)]
struct GatewaySignature {
    key: String,
}

impl Auth for GatewaySignature {
    fn authorize<'a>(&'a self, request: &'a mut reqwest::Request) -> AuthFuture<'a> {
        let body = request
            .body()
            .and_then(|b| b.as_bytes())
            .map_or(0, <[u8]>::len);
        let covered = format!(
            "key={}, method={}, path={}, body-bytes={body}",
            self.key,
            request.method(),
            request.url().path()
        );
        Box::pin(async move {
            let mut value = HeaderValue::from_str(&covered)
                .map_err(|_| ModelError::Config("the key cannot go in a header".into()))?;
            value.set_sensitive(true);
            request.headers_mut().insert("x-gateway-signature", value);
            Ok(())
        })
    }
}

/// The whole provider. What it does not say has the trait's defaults (the `Accept` of
/// its codec's framing, no extra headers, no settings...).
struct Gateway;

impl Provider for Gateway {
    fn name(&self) -> &'static str {
        "acme-gateway"
    }
    fn codec(&self) -> &'static dyn Codec {
        Format::OPENAI_CHAT.codec()
    }
    fn default_model(&self) -> &'static str {
        "acme-large"
    }
    fn base_url_template(&self) -> &'static str {
        "https://llm.acme.internal"
    }
    /// `{base}/gateway/v2/models/{model}/chat`.
    fn route(&self, c: &RouteContext<'_>) -> Result<Route, ModelError> {
        Ok(Route::path(format!(
            "/gateway/v2/models/{}/chat",
            c.model_segment
        )))
    }
    fn genai_name(&self) -> &'static str {
        "acme"
    }
    fn summary(&self) -> &'static str {
        "ACME's LLM gateway (OpenAI Chat wire format)"
    }
    fn base_url_env(&self) -> &'static [&'static str] {
        &["ACME_GATEWAY_URL"]
    }
    fn key_env(&self) -> &'static [&'static str] {
        &["ACME_GATEWAY_KEY"]
    }
    fn auth(&self, config: &HttpModelConfig) -> Result<Option<Arc<dyn Auth>>, ModelError> {
        Ok(config.api_key.as_ref().map(|k| {
            Arc::new(GatewaySignature {
                key: k.expose_secret().to_owned(),
            }) as Arc<dyn Auth>
        }))
    }
}

static GATEWAY: Gateway = Gateway;

/// Answers one request with an OpenAI Chat stream holding a tool call, after checking
/// the path and the signature.
fn gateway() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream);
        let mut head = Vec::new();
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 2 {
            head.push(line.trim_end().to_owned());
            line.clear();
        }
        let length: usize = head
            .iter()
            .find_map(|h| {
                h.to_ascii_lowercase()
                    .strip_prefix("content-length: ")?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let expected = format!(
            "x-gateway-signature: key=k-123, method=POST, path=/gateway/v2/models/acme-large/chat, body-bytes={length}"
        );
        let ok = head[0].starts_with("POST /gateway/v2/models/acme-large/chat ")
            && head.iter().any(|h| h.eq_ignore_ascii_case(&expected));
        let sse = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let (status, body) = if ok {
            ("200 OK", sse)
        } else {
            (
                "401 Unauthorized",
                "{\"error\":{\"message\":\"bad signature\"}}",
            )
        };
        let kind = if ok {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut stream = reader.into_inner();
        write!(
            stream,
            "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
    });
    base
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = HttpModelConfig::for_provider(&GATEWAY, GATEWAY.default_model())
        .base_url(gateway())
        .api_key("k-123");
    let model = HttpModel::new(config)?;
    println!("{} sends to {}", GATEWAY.name(), model.url());

    let mut conversation = Conversation::new();
    conversation
        .messages
        .push(Message::user("Weather in Paris?"));
    let out = collect_stream(model.stream(&conversation), |_| {}).await?;
    for call in &out.message.tool_calls {
        println!(
            "call {} {}",
            call.name.as_deref().unwrap_or("?"),
            serde_json::Value::Object(call.arguments_as_map())
        );
    }
    Ok(())
}

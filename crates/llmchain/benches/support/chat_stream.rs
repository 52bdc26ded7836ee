//! The OpenAI Chat stream the decode and turn benches share: one `write_file` call of
//! S bytes of arguments in 8-byte fragments (~280-byte realistic chunks).

#![allow(dead_code)]

/// A realistic "write a file" argument object of about `size` bytes of JSON text.
pub(crate) fn arguments(size: usize) -> String {
    let mut s = String::from("{\"path\": \"src/lib.rs\", \"content\": \"");
    let line = "fn main() { println!(\\\"hello, wörld\\\"); }\\n";
    while s.len() + line.len() + 2 < size {
        s.push_str(line);
    }
    while s.len() + 2 < size {
        s.push('x');
    }
    s.push_str("\"}");
    s
}

pub(crate) fn fragments(args: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(args.len() / 8 + 1);
    let mut i = 0;
    while i < args.len() {
        let mut j = (i + 8).min(args.len());
        while !args.is_char_boundary(j) {
            j += 1;
        }
        out.push(&args[i..j]);
        i = j;
    }
    out
}

const HEAD: &str = r#"{"id":"chatcmpl-AhxL2pQzS1n0RYkQ3Xf2TgW8vUu4","object":"chat.completion.chunk","created":1734611820,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_d28bcae782","choices":[{"index":0,"delta":"#;

/// The SSE body of the stream.
pub(crate) fn stream(args: &str) -> Vec<u8> {
    let mut s = String::with_capacity(args.len() / 8 * 300);
    s.push_str("data: ");
    s.push_str(HEAD);
    s.push_str(r#"{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_c91SqDXlYFuETYv8mUHzz6pp","type":"function","function":{"name":"write_file","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]}"#);
    s.push_str("\n\n");
    for f in fragments(args) {
        s.push_str("data: ");
        s.push_str(HEAD);
        s.push_str(r#"{"tool_calls":[{"index":0,"function":{"arguments":"#);
        s.push_str(&serde_json::to_string(f).unwrap());
        s.push_str(r#"}}]},"logprobs":null,"finish_reason":null}]}"#);
        s.push_str("\n\n");
    }
    s.push_str("data: ");
    s.push_str(HEAD);
    s.push_str(r#"{},"logprobs":null,"finish_reason":"tool_calls"}]}"#);
    s.push_str("\n\n");
    s.push_str(r#"data: {"id":"chatcmpl-AhxL2pQzS1n0RYkQ3Xf2TgW8vUu4","object":"chat.completion.chunk","created":1734611820,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_d28bcae782","choices":[],"usage":{"prompt_tokens":76,"completion_tokens":24,"total_tokens":100}}"#);
    s.push_str("\n\ndata: [DONE]\n\n");
    s.into_bytes()
}

//! Shared by the bench binaries: reading workload A's bodies.

use serde_json::Value;

/// The arguments of a workload-A body reassembled the plain way (the floor's parse input).
pub fn args_of(body: &[u8]) -> String {
    let mut out = String::new();
    for line in body.split(|&b| b == b'\n') {
        if let Some(data) = line.strip_prefix(b"data: ")
            && data != b"[DONE]"
        {
            let v: Value = serde_json::from_slice(data).expect("chunk");
            if let Some(a) =
                v["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            {
                out.push_str(a);
            }
        }
    }
    out
}

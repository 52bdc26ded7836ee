//! [`ToolHints`]: what a tool says of its effects (read-only, destructive, idempotent,
//! open-world), in the words of MCP's tool annotations. A tool of this crate declares
//! them ([`Tool::read_only`] and the others); an MCP tool's server claims them. Review
//! and approval read them; they live here, below both, so that neither the MCP crate
//! nor a front end owns them.

use super::Tool;

/// The annotations of an MCP tool (all hints; the spec's defaults apply when absent:
/// not read-only, destructive, not idempotent, open-world). Never trust them from an
/// untrusted server for anything but defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolHints {
    /// `readOnlyHint`: the tool does not modify its environment.
    pub read_only: bool,
    /// `destructiveHint`: the tool may destroy or overwrite (meaningful when not read-only).
    pub destructive: bool,
    /// `idempotentHint`: calling it twice with the same arguments has no extra effect.
    pub idempotent: bool,
    /// `openWorldHint`: the tool talks to the outside world.
    pub open_world: bool,
}

impl Default for ToolHints {
    /// The MCP spec's defaults for a tool without annotations.
    fn default() -> Self {
        ToolHints {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        }
    }
}

impl ToolHints {
    /// Reads the hints of a tool's `annotations` object (camelCase JSON, as on the wire).
    pub fn from_annotations(a: Option<&serde_json::Value>) -> Self {
        let d = ToolHints::default();
        let get = |k: &str, default: bool| {
            a.and_then(|a| a.get(k))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(default)
        };
        let read_only = get("readOnlyHint", d.read_only);
        ToolHints {
            read_only,
            // A read-only tool cannot be destructive, whatever the flag says.
            destructive: !read_only && get("destructiveHint", d.destructive),
            idempotent: read_only || get("idempotentHint", d.idempotent),
            open_world: get("openWorldHint", d.open_world),
        }
    }

    /// The hints an llmchain tool declares (its `read_only`, `destructive`,
    /// `open_world` and `idempotent` flags), with the MCP defaults for what it does not
    /// declare.
    pub fn of_tool(tool: &Tool) -> Self {
        let mut a = serde_json::Map::new();
        if let Some(r) = tool.read_only() {
            a.insert("readOnlyHint".into(), r.into());
        }
        if let Some(d) = tool.destructive() {
            a.insert("destructiveHint".into(), d.into());
        }
        if let Some(o) = tool.open_world() {
            a.insert("openWorldHint".into(), o.into());
        }
        a.insert("idempotentHint".into(), tool.idempotent().into());
        Self::from_annotations(Some(&serde_json::Value::Object(a)))
    }

    /// Short labels for a UI, e.g. `["read-only"]` or `["destructive"]`.
    pub fn labels(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.read_only {
            v.push("read-only");
        }
        if self.destructive {
            v.push("destructive");
        }
        if self.idempotent {
            v.push("idempotent");
        }
        if self.open_world {
            v.push("open-world");
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(ToolHints::from_annotations(None), ToolHints::default());
        let h = ToolHints::from_annotations(Some(
            &json!({"readOnlyHint": true, "destructiveHint": true}),
        ));
        assert!(h.read_only && !h.destructive && h.idempotent);
        let h = ToolHints::from_annotations(Some(
            &json!({"destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
        ));
        assert!(!h.read_only && !h.destructive && h.idempotent && !h.open_world);
        assert_eq!(h.labels(), vec!["idempotent"]);
    }

    #[test]
    fn of_a_tool_uses_its_declared_flags() {
        let b = || Tool::builder("t").handler(|_, _| async { "ok" });
        assert_eq!(
            ToolHints::of_tool(&b().build().unwrap()),
            ToolHints::default()
        );
        let h = ToolHints::of_tool(&b().read_only(true).build().unwrap());
        assert!(h.read_only && !h.destructive && h.idempotent);
        let h = ToolHints::of_tool(&b().destructive(false).build().unwrap());
        assert!(!h.read_only && !h.destructive && !h.idempotent);
    }
}

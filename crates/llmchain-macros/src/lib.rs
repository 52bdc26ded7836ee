//! The `#[tool]` attribute macro of llmchain. Use it through `llmchain::tool`
//! (re-exported as `#[llmchain::tool]`); see the `llmchain::tool` module docs.
//!
//! `#[tool]` on `async fn name(args: Args) -> R` (or `(args: Args, ctx: ToolContext)`)
//! keeps the function unchanged and adds `fn name_tool() -> llmchain::tool::Tool`.
//! `Args` must derive `serde::Deserialize` and `schemars::JsonSchema` (llmchain
//! re-exports both: `llmchain::prelude` has the derives, and
//! `#[serde(crate = "llmchain::serde")]` `#[schemars(crate = "llmchain::schemars")]` on
//! `Args` need no other dependency); `R` must be `Into<ToolOutput>`. The doc comment
//! becomes the description. `#[tool(crate = "path::to::llmchain")]` names llmchain for a
//! crate that re-exports it.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{format_ident, quote};
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Error, Expr, ExprLit, FnArg, ItemFn, Lit, LitStr, Meta, Pat, Type};

/// Turns an `async fn` into a tool; see the crate docs.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr.into(), item.into()) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

#[derive(Default)]
struct Attrs {
    name: Option<LitStr>,
    description: Option<LitStr>,
    display_text: Option<LitStr>,
    timeout_ms: Option<u64>,
    max_concurrency: Option<usize>,
    idempotent: bool,
    strict: bool,
    read_only: bool,
    destructive: bool,
    /// Where llmchain is (`crate = "path"`), for a crate that re-exports it.
    krate: Option<syn::Path>,
}

fn parse_attrs(attr: proc_macro2::TokenStream) -> syn::Result<Attrs> {
    let mut a = Attrs::default();
    let parser = syn::meta::parser(|meta| {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match key.as_str() {
            "name" => a.name = Some(meta.value()?.parse()?),
            "description" => a.description = Some(meta.value()?.parse()?),
            "display_text" => a.display_text = Some(meta.value()?.parse()?),
            "timeout_ms" => {
                let lit: syn::LitInt = meta.value()?.parse()?;
                let ms: u64 = lit.base10_parse()?;
                if ms == 0 {
                    return Err(Error::new(lit.span(), "timeout_ms must be at least 1"));
                }
                a.timeout_ms = Some(ms);
            }
            "max_concurrency" => {
                let lit: syn::LitInt = meta.value()?.parse()?;
                let n: usize = lit.base10_parse()?;
                if n == 0 {
                    return Err(Error::new(lit.span(), "max_concurrency must be at least 1"));
                }
                a.max_concurrency = Some(n);
            }
            "idempotent" => a.idempotent = true,
            "strict" => a.strict = true,
            "read_only" => a.read_only = true,
            "destructive" => a.destructive = true,
            "crate" => {
                let lit: LitStr = meta.value()?.parse()?;
                a.krate = Some(lit.parse()?);
            }
            _ => {
                return Err(meta.error(
                    "unknown #[tool] attribute; expected one of: name, description, \
                     display_text, timeout_ms, max_concurrency, idempotent, strict, \
                     read_only, destructive, crate",
                ));
            }
        }
        Ok(())
    });
    parser.parse2(attr)?;
    Ok(a)
}

/// The provider-legal name rule, checked at compile time (same as `llmchain::tool::validate_name`).
fn check_name(name: &str, span: Span) -> syn::Result<()> {
    if name.is_empty() || name.chars().count() > 64 {
        return Err(Error::new(
            span,
            format!("invalid tool name {name:?}: it must be 1 to 64 characters long"),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(Error::new(
            span,
            format!(
                "invalid tool name {name:?}: character {c:?} is not allowed; use only a-z, A-Z, 0-9, '_' and '-'"
            ),
        ));
    }
    Ok(())
}

fn doc_comment(f: &ItemFn) -> String {
    let mut lines = Vec::new();
    for attr in &f.attrs {
        if let Meta::NameValue(nv) = &attr.meta
            && nv.path.is_ident("doc")
            && let Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) = &nv.value
        {
            let v = s.value();
            lines.push(v.strip_prefix(' ').unwrap_or(&v).trim_end().to_owned());
        }
    }
    lines.join("\n").trim().to_owned()
}

const SCALARS: &[&str] = &[
    "bool", "char", "str", "String", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16",
    "u32", "u64", "u128", "usize", "f32", "f64", "Vec", "Option", "Value", "HashMap", "BTreeMap",
];

fn check_args_type(ty: &Type) -> syn::Result<()> {
    let bad = |what: &str| {
        Err(Error::new(
            ty.span(),
            format!(
                "#[tool]: the argument must be an owned struct deriving Deserialize and JsonSchema \
                 (tool arguments are a JSON object), not {what}"
            ),
        ))
    };
    match ty {
        Type::Reference(_) => bad("a reference"),
        Type::Tuple(_) => bad("a tuple"),
        Type::Array(_) | Type::Slice(_) => bad("an array or slice"),
        Type::ImplTrait(_) | Type::TraitObject(_) => bad("a trait type"),
        Type::Path(p) => {
            let last = p
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            if SCALARS.contains(&last.as_str()) {
                bad(&format!("`{last}`"))
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

fn expand(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let attrs = parse_attrs(attr)?;
    let f: ItemFn = syn::parse2(item)
        .map_err(|e| Error::new(e.span(), format!("#[tool] goes on an `async fn`: {e}")))?;
    let sig = &f.sig;
    if sig.asyncness.is_none() {
        return Err(Error::new(
            sig.fn_token.span(),
            "#[tool] needs an `async fn`: tool bodies are async",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(Error::new(
            sig.generics.span(),
            "#[tool] functions cannot be generic: the argument type fixes the schema",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(Error::new(v.span(), "#[tool] functions cannot be variadic"));
    }
    let mut typed = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(r) => {
                return Err(Error::new(
                    r.span(),
                    "#[tool] goes on a free `async fn`, not a method (no `self`)",
                ));
            }
            FnArg::Typed(t) => {
                if !matches!(*t.pat, Pat::Ident(_) | Pat::Wild(_)) {
                    return Err(Error::new(
                        t.pat.span(),
                        "#[tool]: use a plain name for the argument (destructure it in the body)",
                    ));
                }
                typed.push(t);
            }
        }
    }
    let args_ty = match typed.as_slice() {
        [] => {
            return Err(Error::new(
                sig.paren_token.span.join(),
                "#[tool] functions take one argument: a struct deriving Deserialize and JsonSchema \
                 (and optionally a second one, the ToolContext)",
            ));
        }
        [a] | [a, _] => &a.ty,
        [_, _, extra, ..] => {
            return Err(Error::new(
                extra.span(),
                "#[tool] functions take at most two arguments: the argument struct and the ToolContext",
            ));
        }
    };
    check_args_type(args_ty)?;
    let with_ctx = typed.len() == 2;

    let fn_name = &sig.ident;
    let name_lit = match &attrs.name {
        Some(l) => l.clone(),
        None => LitStr::new(&fn_name.to_string(), fn_name.span()),
    };
    check_name(&name_lit.value(), name_lit.span())?;
    let description = match &attrs.description {
        Some(d) => d.value(),
        None => doc_comment(&f),
    };
    if description.is_empty() {
        return Err(Error::new(
            fn_name.span(),
            "#[tool] needs a description: add a doc comment (`/// What the tool does.`) \
             or `#[tool(description = \"...\")]`",
        ));
    }
    let display = match &attrs.display_text {
        Some(d) => quote!(::core::option::Option::Some(#d)),
        None => quote!(::core::option::Option::None),
    };
    let timeout = match attrs.timeout_ms {
        Some(ms) => quote!(::core::option::Option::Some(#ms)),
        None => quote!(::core::option::Option::None),
    };
    let max_conc = match attrs.max_concurrency {
        Some(n) => quote!(::core::option::Option::Some(#n)),
        None => quote!(::core::option::Option::None),
    };
    let idempotent = attrs.idempotent;
    let strict = attrs.strict;
    let hint = |yes: bool| {
        if yes {
            quote!(::core::option::Option::Some(true))
        } else {
            quote!(::core::option::Option::None)
        }
    };
    let read_only = hint(attrs.read_only);
    let destructive = hint(attrs.destructive);
    if attrs.read_only && attrs.destructive {
        return Err(Error::new(
            Span::call_site(),
            "a #[tool] cannot be both read_only and destructive",
        ));
    }
    let vis = &f.vis;
    let tool_fn = format_ident!("{}_tool", fn_name);
    let call = if with_ctx {
        quote!(#fn_name(args, ctx))
    } else {
        quote!({
            let _ = ctx;
            #fn_name(args)
        })
    };
    let doc = format!("The tool of [`{fn_name}`] (generated by `#[tool]`).");
    let krate = match &attrs.krate {
        Some(p) => quote!(#p),
        None => quote!(::llmchain),
    };

    Ok(quote! {
        #f

        #[doc = #doc]
        #vis fn #tool_fn() -> #krate::tool::Tool {
            #krate::tool::__private::macro_tool::<#args_ty, _, _, _>(
                #krate::tool::__private::MacroSpec {
                    name: #name_lit,
                    description: #description,
                    display_text: #display,
                    timeout_ms: #timeout,
                    max_concurrency: #max_conc,
                    idempotent: #idempotent,
                    strict: #strict,
                    read_only: #read_only,
                    destructive: #destructive,
                },
                |args: #args_ty, ctx: #krate::tool::ToolContext| #call,
            )
        }
    })
}

//! Call ids unique within a conversation: the one rule, used by the chain when a model
//! message arrives and by anyone who must name a streamed call before it does (a front
//! end's protocol names a call as its first fragment streams).

use std::collections::HashSet;

/// The id a call with wire id `id` gets in a conversation whose calls already use
/// `taken`: `id` itself when free, else `<id>_<n>` with the smallest free `n` from 2.
/// Inserts the result into `taken`.
///
/// ```
/// use std::collections::HashSet;
/// use llmchain::conversation::unique_call_id;
/// let mut taken: HashSet<String> = ["call_0".to_owned(), "call_0_2".to_owned()].into();
/// assert_eq!(unique_call_id(&mut taken, "call_1"), "call_1");
/// assert_eq!(unique_call_id(&mut taken, "call_0"), "call_0_3");
/// assert_eq!(unique_call_id(&mut taken, "call_1"), "call_1_2");
/// ```
pub fn unique_call_id(taken: &mut HashSet<String>, id: &str) -> String {
    if taken.insert(id.to_owned()) {
        return id.to_owned();
    }
    let mut n = 2u64;
    loop {
        let candidate = format!("{id}_{n}");
        if taken.insert(candidate.clone()) {
            return candidate;
        }
        n += 1;
    }
}

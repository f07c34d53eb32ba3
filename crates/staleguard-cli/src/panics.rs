//! A panic in staleguard is a bug, never the user's fault; it must reach the user as one clear
//! error and never end the process that hosts it (the CLI, the proxy, the MCP guard, a Python
//! or Node.js program). [`contain`] turns a panic into an error with its message; the hook
//! that [`install`] sets keeps the panic's location for it and prints nothing of a contained
//! panic. A panic's message can hold request text (a string slice's panic quotes the string),
//! so a panic nothing contains is reported by its location and thread alone: that is what a
//! server's log gets.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Inside [`contain`] on this thread.
    static CONTAINED: Cell<bool> = const { Cell::new(false) };
    /// Where the contained panic happened, as the hook saw it.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A panic caught by [`contain`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panicked {
    /// The panic's message (it can quote the input).
    pub message: String,
    /// `file:line:column`, when the hook of [`install`] saw it.
    pub location: Option<String>,
}

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "internal error: {}", self.message)?;
        if let Some(at) = &self.location {
            write!(f, " (at {at})")?;
        }
        write!(f, "; this is a bug in staleguard, please report it")
    }
}

/// Runs `work`; a panic in it comes back as [`Panicked`] instead of unwinding further.
pub fn contain<T>(work: impl FnOnce() -> T) -> Result<T, Panicked> {
    install();
    let outer = CONTAINED.with(|c| c.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(work));
    CONTAINED.with(|c| c.set(outer));
    result.map_err(|payload| Panicked {
        message: message_of(payload.as_ref()),
        location: LOCATION.with(|l| l.borrow_mut().take()),
    })
}

/// The text of a panic's payload: `panic!` gives a `&str` or a `String`.
fn message_of(payload: &(dyn std::any::Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_string(),
    }
}

/// Sets the process's panic hook once: silent inside [`contain`] (which reports the panic),
/// and elsewhere one line with the thread and location, without the message.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        panic::set_hook(Box::new(|info| {
            let location = info.location().map(|l| l.to_string());
            if CONTAINED.with(Cell::get) {
                LOCATION.with(|l| *l.borrow_mut() = location);
                return;
            }
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("unnamed");
            let at = location.as_deref().unwrap_or("an unknown place");
            eprintln!(
                "staleguard: internal error: thread '{name}' panicked at {at} (message withheld: it can hold request text); this is a bug in staleguard, please report it"
            );
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contained_panic_is_an_error_with_its_message_and_place() {
        let text = "打开https://a";
        let panicked = contain(|| text[..1].len()).unwrap_err();
        assert!(
            panicked.message.contains("is not a char boundary"),
            "{panicked:?}"
        );
        let at = panicked.location.as_deref().unwrap_or_default();
        assert!(at.contains("panics.rs"), "{at}");
        assert!(panicked.to_string().starts_with("internal error: "));
        // Work that does not panic answers as it would; a nested panic is the inner one's.
        assert_eq!(contain(|| 7), Ok(7));
        let outer = contain(|| contain(|| panic!("inner")).map_err(|p| p.message));
        assert_eq!(outer, Ok(Err("inner".to_string())));
    }
}

//! Everything fslat says about a script: one `Diagnostic` type (a span, a kind, hints),
//! rendered once with the source line and a caret. A leaf of the crate: the syntax, the
//! checker and the driver import it, it imports none of them.
//!
//! `kinds`: every kind, its stable code and all its wording; `render`: the one way a
//! diagnostic is shown; `suggest`: "did you mean" candidates.

mod kinds;
mod render;
mod suggest;

pub use kinds::DiagKind;
pub use render::{Source, render};
pub use suggest::closest;

/// Byte offsets into the script.
pub type Span = std::ops::Range<usize>;

#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub span: Span,
    pub kind: DiagKind,
    pub hints: Vec<String>,
}

impl Diagnostic {
    pub fn new(span: Span, kind: DiagKind) -> Self {
        Diagnostic {
            span,
            kind,
            hints: Vec::new(),
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }
}

//! `struct fslat_args`: a bundle's script arguments (`$1`..), their layout and the image
//! fslat writes before load from a run's words.

use super::super::program::{ArgKind, Program, ScriptArg};

/// The section of `struct fslat_args`, a bundle's script arguments (`Program::args`),
/// which fslat writes before load (`Program::args_image`): `const volatile`, so the
/// verifier knows each value. Short enough for the kernel's 15-byte map names.
pub const ARGS_SECTION: &str = ".rodata.args";

/// The field of `struct fslat_args` that holds `$n` (`$#` for 0).
pub fn arg_field(n: usize) -> String {
    match n {
        0 => "count".into(),
        n => format!("a{n}"),
    }
}

/// A field of `struct fslat_args`: the integers and durations first (8 bytes each), then
/// the strings (char arrays of a multiple of 8 bytes), each group by number.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgField {
    pub arg: ScriptArg,
    pub offset: usize,
    pub size: usize,
}

impl ArgField {
    /// Its C declaration.
    pub fn decl(&self) -> String {
        let name = arg_field(self.arg.n);
        match self.arg.kind {
            ArgKind::Int => format!("__s64 {name}"),
            ArgKind::Duration => format!("__u64 {name}"),
            ArgKind::Str { cap } => format!("char {name}[{cap}]"),
        }
    }
}

/// Why a run's arguments do not fit the program (a bundle's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error(
        "`${n}` is not given: the program reads it, and this run has {given} argument{}; give it after the bundle: `fslat FILE ARG1 ...`",
        if *given == 1 { "" } else { "s" }
    )]
    Missing { n: usize, given: usize },
    #[error(
        "`{name}` is {kind} in this bundle, and `{word}` is not one: give {kind}, or build the bundle with an example of what `{name}` takes (`fslat build SCRIPT ... {word} ... -o FILE`)"
    )]
    Kind {
        name: String,
        kind: &'static str,
        word: String,
    },
    #[error(
        "`{name}` holds at most {max} bytes in this bundle, and `{word}` has {len}; build it with an example that long: `fslat build SCRIPT ... {word} ... -o FILE`"
    )]
    TooLong {
        name: String,
        max: u32,
        word: String,
        len: usize,
    },
    #[error(
        "`{name}` is fixed at `{built}` in this bundle ({by} compiled in when it was built), and this run gives `{word}`: run it with `{built}`, or build it again with `fslat build SCRIPT ... {word} ... -o FILE`"
    )]
    Fixed {
        name: String,
        built: String,
        by: String,
        word: String,
    },
}

impl Program {
    /// The fields of `struct fslat_args`, in their order; empty when `$1`.. are
    /// constants.
    pub fn arg_fields(&self) -> Vec<ArgField> {
        let (ints, strings): (Vec<&ScriptArg>, Vec<&ScriptArg>) = self
            .args
            .iter()
            .partition(|a| !matches!(a.kind, ArgKind::Str { .. }));
        let mut at = 0;
        let mut fields = Vec::new();
        for arg in ints.into_iter().chain(strings) {
            let size = match arg.kind {
                ArgKind::Str { cap } => cap as usize,
                _ => 8,
            };
            fields.push(ArgField {
                arg: arg.clone(),
                offset: at,
                size,
            });
            at += size;
        }
        fields
    }

    /// The size of `struct fslat_args` (every field's size is a multiple of 8).
    pub fn args_size(&self) -> usize {
        self.arg_fields().last().map_or(0, |f| f.offset + f.size)
    }

    /// The initial value of `struct fslat_args` for a run with `words` as `$1`..: each
    /// argument the program takes must be given, of its kind, and where it is fixed, the
    /// value it was built with.
    pub fn args_image(&self, words: &[String]) -> Result<Vec<u8>, ArgError> {
        use super::super::positional::argument_value;
        use super::super::program::{ExprKind, Ty};
        let mut fields = self.arg_fields();
        let mut image = vec![0u8; self.args_size()];
        // The first argument at fault is the one named.
        fields.sort_by_key(|f| f.arg.n);
        for f in &fields {
            let arg = &f.arg;
            let count = words.len().to_string();
            let word = match arg.n {
                0 => &count,
                n => words.get(n - 1).ok_or(ArgError::Missing {
                    n,
                    given: words.len(),
                })?,
            };
            let value = argument_value(word);
            if let Some(fixed) = &arg.fixed
                && value != argument_value(&fixed.word)
            {
                return Err(ArgError::Fixed {
                    name: arg.name(),
                    built: fixed.word.clone(),
                    by: fixed.by.clone(),
                    word: word.clone(),
                });
            }
            let kind_error = || ArgError::Kind {
                name: arg.name(),
                kind: arg.kind.describe(),
                word: word.clone(),
            };
            let bytes = match (arg.kind, &value.ty, &value.kind) {
                (ArgKind::Int, Ty::Int(_), ExprKind::Int(v)) => (*v as i64).to_ne_bytes().to_vec(),
                (ArgKind::Duration, Ty::Duration, ExprKind::Int(v)) => {
                    (*v as u64).to_ne_bytes().to_vec()
                }
                (ArgKind::Str { cap }, _, _) => {
                    if word.len() >= cap as usize {
                        return Err(ArgError::TooLong {
                            name: arg.name(),
                            max: cap - 1,
                            word: word.clone(),
                            len: word.len(),
                        });
                    }
                    word.as_bytes().to_vec()
                }
                _ => return Err(kind_error()),
            };
            image[f.offset..f.offset + bytes.len()].copy_from_slice(&bytes);
        }
        Ok(image)
    }
}

//! Closed sets of words (`runtime`, `transport`, `binding`, …) as enums.
//!
//! `closed_set!` declares the enum with its YAML spelling for each variant, and gives it
//! `ALL`, `NAMES`, `as_str`, `parse`, `Display`, `Serialize` and `Deserialize`. A word outside
//! the set deserializes to an error carrying the set's own diagnostic code, a message naming
//! the word, and a hint listing every valid word (and the closest one, for a likely typo).

macro_rules! closed_set {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($code:expr, $noun:literal) {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every member, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// Every member's YAML spelling, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The YAML spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The member spelled `text`, if any.
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The diagnostic for `text`, which is not a member.
            pub(crate) fn unknown(text: &str) -> $crate::diagnostic::Diagnostic {
                let mut hint = format!("use one of: {}", Self::NAMES.join(", "));
                if let Some(close) = $crate::diagnostic::closest(text, Self::NAMES.iter().copied()) {
                    hint.push_str(&format!(" (did you mean `{close}`?)"));
                }
                $crate::diagnostic::Diagnostic::new($code, format!("unknown {} `{}`", $noun, text))
                    .hint(hint)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Words;
                impl serde::de::Visitor<'_> for Words {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(f, "one of: {}", $name::NAMES.join(", "))
                    }
                    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<$name, E> {
                        $name::parse(text)
                            .ok_or_else(|| $crate::diagnostic::serde_error(&$name::unknown(text)))
                    }
                }
                deserializer.deserialize_str(Words)
            }
        }
    };
}

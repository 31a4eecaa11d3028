//! The `knobs!` macro: from the one list in `knobs.rs` it declares [`super::ShopKnobs`], its
//! `serve` flags, its `[shop]`/`report.json` forms, its defaults, range checks and the `serve`
//! command line that reproduces them (another command's flags take their defaults from it).

/// Declares [`super::ShopKnobs`] from six lists: choices first (`name: EnumType =
/// Default::Variant;`, a `clap::ValueEnum` spelled in kebab-case), then optional choices
/// (`name: EnumType;`: absent unless given), then switches (`name;`: a `bool`, off by default,
/// the bare flag `--name` turns it on), then the runner's own settings (never a `serve` flag),
/// then durations (`name (old_key in Unit) = default, min..=max;`, the numbers in that unit),
/// then numbers (`name: type = default, min..=max;`).
///
/// A duration is a [`std::time::Duration`] field, the flag `--name 500ms` (a bare number is
/// refused with a hint) and the `[shop]` key `name = "500ms"`. Its old spelling, a bare number
/// in its unit, is still read: the hidden flag `--old-key N` and the key `old_key = N`; giving
/// both spellings is an error naming both. `report.json` keeps the old key and its unit (a
/// whole number whenever the duration is one), so what older oversell versions and scripts
/// read from a report is unchanged.
macro_rules! knobs {
    (
        choices { $( $(#[doc = $cdoc:literal])* $cname:ident: $cty:ty = $cdefault:expr; )* }
        optional { $( $(#[doc = $odoc:literal])* $oname:ident: $oty:ty; )* }
        switches { $( $(#[doc = $sdoc:literal])* $sname:ident; )* }
        runner { $( $(#[doc = $rdoc:literal])* $rname:ident: $rty:ty = $rdefault:literal, $rmin:literal..=$rmax:expr; )* }
        durations { $( $(#[doc = $ddoc:literal])* $dname:ident ($dold:ident in $dunit:ident) = $ddefault:literal, $dmin:literal..=$dmax:literal; )* }
        numbers { $( $(#[doc = $doc:literal])* $name:ident: $ty:ty = $default:literal, $min:literal..=$max:literal; )* }
    ) => {
        /// The reference shop's knobs (`serve` flags; `run`/`compare` take them from the
        /// scenario's `[shop]` table and hand them to the child shop).
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(into = "Wire", try_from = "Overlay")]
        pub struct ShopKnobs {
            $( $(#[doc = $doc])* pub $name: $ty, )*
            $( $(#[doc = $ddoc])* pub $dname: std::time::Duration, )*
            $( $(#[doc = $cdoc])* pub $cname: $cty, )*
            $( $(#[doc = $odoc])* pub $oname: Option<$oty>, )*
            $( $(#[doc = $sdoc])* pub $sname: bool, )*
            $( $(#[doc = $rdoc])* pub $rname: $rty, )*
        }

        impl Default for ShopKnobs {
            fn default() -> Self {
                ShopKnobs {
                    $( $name: $default, )*
                    $( $dname: unit::Unit::$dunit.duration($ddefault), )*
                    $( $cname: $cdefault, )*
                    $( $oname: None, )*
                    $( $sname: false, )*
                    $( $rname: $rdefault, )*
                }
            }
        }

        /// `serve`'s flags: every knob but the runner's, each duration also under its old,
        /// hidden spelling.
        #[derive(clap::Args)]
        struct KnobFlags {
            $( $(#[doc = $doc])* #[arg(long, default_value_t = $default)] $name: $ty, )*
            $(
                $(#[doc = $ddoc])*
                #[arg(long, value_name = "DURATION", value_parser = unit::flag,
                      default_value_t = unit::Unit::$dunit.duration($ddefault).into())]
                $dname: humantime::Duration,
                #[arg(long, value_name = unit::Unit::$dunit.value_name(), hide = true,
                      conflicts_with = stringify!($dname))]
                $dold: Option<u64>,
            )*
            $( $(#[doc = $cdoc])* #[arg(long, value_enum, default_value_t = $cdefault)] $cname: $cty, )*
            $( $(#[doc = $odoc])* #[arg(long, value_enum)] $oname: Option<$oty>, )*
            $( $(#[doc = $sdoc])* #[arg(long)] $sname: bool, )*
        }

        impl From<KnobFlags> for ShopKnobs {
            fn from(f: KnobFlags) -> Self {
                ShopKnobs {
                    $( $name: f.$name, )*
                    $( $dname: f.$dold.map_or(*f.$dname, |n| unit::Unit::$dunit.duration(n)), )*
                    $( $cname: f.$cname, )*
                    $( $oname: f.$oname, )*
                    $( $sname: f.$sname, )*
                    $( $rname: $rdefault, )*
                }
            }
        }

        /// The `[shop]` table as written: every knob optional (`null`, as an older
        /// `report.json` spells an absent one, also keeps the default), a duration under its
        /// new key or its old one.
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Overlay {
            $( $name: Option<$ty>, )*
            $( $dname: Option<unit::Text>, $dold: Option<f64>, )*
            $( $cname: Option<$cty>, )*
            $( $oname: Option<$oty>, )*
            $( $sname: Option<bool>, )*
            $( $rname: Option<$rty>, )*
        }

        impl TryFrom<Overlay> for ShopKnobs {
            type Error = String;
            fn try_from(o: Overlay) -> Result<Self, String> {
                Ok(ShopKnobs {
                    $( $name: o.$name.unwrap_or($default), )*
                    $( $dname: unit::either(
                        (stringify!($dname), o.$dname),
                        (stringify!($dold), o.$dold),
                        unit::Unit::$dunit,
                    )?
                    .unwrap_or(unit::Unit::$dunit.duration($ddefault)), )*
                    $( $cname: o.$cname.unwrap_or($cdefault), )*
                    $( $oname: o.$oname, )*
                    $( $sname: o.$sname.unwrap_or(false), )*
                    $( $rname: o.$rname.unwrap_or($rdefault), )*
                })
            }
        }

        /// The serialized form (`report.json`, a report's scenario): a duration under its old
        /// key, counted in its old unit.
        #[derive(serde::Serialize)]
        struct Wire {
            $( $name: $ty, )*
            $( $dold: unit::Count, )*
            $( $cname: $cty, )*
            $( $oname: Option<$oty>, )*
            $( $sname: bool, )*
            $( $rname: $rty, )*
        }

        impl From<ShopKnobs> for Wire {
            fn from(k: ShopKnobs) -> Self {
                Wire {
                    $( $name: k.$name, )*
                    $( $dold: unit::Unit::$dunit.count(k.$dname), )*
                    $( $cname: k.$cname, )*
                    $( $oname: k.$oname, )*
                    $( $sname: k.$sname, )*
                    $( $rname: k.$rname, )*
                }
            }
        }

        impl ShopKnobs {
            /// Every knob's name, as a `[shop]` key and (`_` as `-`) a flag, in the list's
            /// order by kind: numbers, durations, choices, optional, switches, the runner's.
            pub const NAMES: &[&str] = &[
                $( stringify!($name), )* $( stringify!($dname), )* $( stringify!($cname), )*
                $( stringify!($oname), )* $( stringify!($sname), )* $( stringify!($rname), )*
            ];

            /// Each duration's name and its old key (the unit in its name: `work_ms`).
            pub const OLD_KEYS: &[(&str, &str)] = &[ $( (stringify!($dname), stringify!($dold)), )* ];

            /// Checks every number's and duration's range, in the order they are listed (a
            /// choice is valid by its type).
            pub fn validate(&self) -> Result<(), KnobError> {
                $( KnobError::check(stringify!($name), self.$name as f64, $min as f64, $max as f64)?; )*
                $( KnobError::check_duration(
                    stringify!($dname),
                    self.$dname,
                    unit::Unit::$dunit.duration($dmin),
                    unit::Unit::$dunit.duration($dmax),
                )?; )*
                $( KnobError::check(stringify!($rname), self.$rname as f64, $rmin as f64, $rmax as f64)?; )*
                Ok(())
            }

            /// These knobs with every one `m` holds a value for set from it: `m` parsed some
            /// of `serve`'s flags ([`ShopKnobs::flags_of`]); the others are kept.
            pub fn with_flags(mut self, m: &clap::ArgMatches) -> Self {
                $( if let Ok(Some(v)) = m.try_get_one::<$ty>(stringify!($name)) {
                    self.$name = *v;
                } )*
                $( if let Ok(Some(v)) = m.try_get_one::<humantime::Duration>(stringify!($dname)) {
                    self.$dname = **v;
                } )*
                $( if let Ok(Some(v)) = m.try_get_one::<$cty>(stringify!($cname)) {
                    self.$cname = v.clone();
                } )*
                $( if let Ok(Some(v)) = m.try_get_one::<$oty>(stringify!($oname)) {
                    self.$oname = Some(v.clone());
                } )*
                $( if let Ok(Some(v)) = m.try_get_one::<bool>(stringify!($sname)) {
                    self.$sname = *v;
                } )*
                self
            }

            /// The `serve` flags that reproduce these knobs, each in its current spelling
            /// (`--pool-size 10`, `--work 1ms`); the runner's own (`shops`) are left out.
            pub fn command_line(&self) -> Vec<String> {
                let flag = |name: &str| format!("--{}", name.replace('_', "-"));
                let mut args = Vec::new();
                $( args.extend([flag(stringify!($name)), self.$name.to_string()]); )*
                $( args.extend([flag(stringify!($dname)), crate::duration::shown(self.$dname)]); )*
                $( args.extend([flag(stringify!($cname)), spelling(&self.$cname)]); )*
                $( if let Some(v) = &self.$oname {
                    args.extend([flag(stringify!($oname)), spelling(v)]);
                } )*
                $( if self.$sname {
                    args.push(flag(stringify!($sname)));
                } )*
                args
            }
        }
    };
}

# utils/parse_options.sh: command-line options for recipe scripts, with Kaldi's semantics.
#
# Source it after setting the defaults; it consumes the leading --options and leaves the
# positional arguments in "$@":
#
#   stage=0
#   nj=4
#   use_gpu=false
#   help_message="Usage: $0 [--stage N] [--nj N] [--use-gpu true|false] <data-dir>"
#   . utils/parse_options.sh || exit 1
#   [ $# -eq 1 ] || { echo "$help_message" >&2; exit 1; }
#
# Rules:
#   --foo-bar VALUE, --foo_bar VALUE, --foo-bar=VALUE  set the variable foo_bar, which must already
#                              be defined (an unknown option is an error: exit 1).
#   A variable whose default is true/false only accepts true or false.
#   --config FILE              sources FILE (shell assignments, e.g. "nj=8") before any other
#                              option is applied, so the command line overrides the file.
#   --help, -h                 prints $help_message and exits 0.
#   --                         ends the options.
# The first argument that does not start with -- ends the options too.

__po_die() {
  echo "$0: $*" >&2
  exit 1
}

# Pass 1: config files (so that explicit options win whatever their order).
__po_i=1
while [ "$__po_i" -le $# ]; do
  __po_arg=${!__po_i}
  case "$__po_arg" in
    --) break ;;
    --config|--config=*)
      if [ "$__po_arg" = "--config" ]; then
        __po_i=$((__po_i + 1))
        [ "$__po_i" -le $# ] || __po_die "option --config needs a file"
        __po_file=${!__po_i}
      else
        __po_file=${__po_arg#--config=}
      fi
      [ -r "$__po_file" ] || __po_die "--config $__po_file: no such file"
      # shellcheck disable=SC1090
      . "$__po_file" || __po_die "error in config file $__po_file"
      ;;
    --help|-h) break ;;
    --*=*) ;;
    --?*) __po_i=$((__po_i + 1)) ;;   # skip the option's value
    *) break ;;
  esac
  __po_i=$((__po_i + 1))
done

# Pass 2: the options themselves.
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h)
      if [ -z "${help_message:-}" ]; then
        echo "$0: no help message defined (set help_message before sourcing utils/parse_options.sh)"
      else
        printf '%s\n' "$help_message"
      fi
      exit 0
      ;;
    --)
      shift
      break
      ;;
    --config=*)
      shift
      ;;
    --config)
      shift 2
      ;;
    --?*=*)
      __po_name=${1%%=*}
      __po_value=${1#*=}
      __po_opt=$__po_name
      shift
      ;;
    --?*)
      __po_opt=$1
      [ $# -ge 2 ] || __po_die "option $1 needs a value"
      __po_value=$2
      shift 2
      ;;
    *)
      break
      ;;
  esac
  case "${__po_opt:-}" in
    "") continue ;;
  esac
  __po_name=${__po_opt#--}
  __po_name=${__po_name//-/_}
  if ! [[ "$__po_name" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || [ -z "${!__po_name+set}" ]; then
    __po_die "unknown option $__po_opt"
  fi
  __po_old=${!__po_name}
  if [ "$__po_old" = true ] || [ "$__po_old" = false ]; then
    if [ "$__po_value" != true ] && [ "$__po_value" != false ]; then
      __po_die "option $__po_opt takes true or false, got '$__po_value'"
    fi
  fi
  printf -v "$__po_name" '%s' "$__po_value"
  __po_opt=
done

unset -v __po_i __po_arg __po_file __po_name __po_value __po_opt __po_old
unset -f __po_die
true

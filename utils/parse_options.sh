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
#
# After it, $cmdline_options lists the names of the variables the user set, once each, space-separated:
# those a --config file assigns ('name=value' lines), then the --options. A script can so tell an
# option given from its default whatever the value (utils/stage_setup.sh, utils/recipe_common.sh).
#
# $cmdline_args is the whole command line as typed ($0 and every argument, shell-quoted), for the
# results pages (utils/recipe_common.sh's record_run).
#
# Not options (an error like an unknown option): names with an upper-case letter (the environment:
# PATH, HOME, LC_ALL, MAIN_ROOT, OMP_NUM_THREADS, ...), names starting with '_', and the scripts'
# own bookkeeping: help_message, cmdline_options, cmdline_args, setup_keys, default_*, and cmd.sh's job commands
# (train_cmd, decode_cmd, cuda_cmd, cmd_backend: choose them in cmd.sh).

__po_die() {
  echo "$0: $*" >&2
  exit 1
}
# __po_given NAME: add NAME to $cmdline_options (once)
__po_given() {
  case " $cmdline_options " in *" $1 "*) ;; *) cmdline_options="${cmdline_options:+$cmdline_options }$1" ;; esac
}

cmdline_options=
cmdline_args=$(printf '%q ' "$0" "$@")
cmdline_args=${cmdline_args% }

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
      # the names it assigns ('name=value' lines) count as given
      for __po_name in $(sed -n 's/^[[:space:]]*\([a-z][a-z0-9_]*\)=.*/\1/p' "$__po_file"); do
        __po_given "$__po_name"
      done
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
  if ! [[ "$__po_name" =~ ^[a-z][a-z0-9_]*$ ]] || [ -z "${!__po_name+set}" ]; then
    __po_die "unknown option $__po_opt"
  fi
  case "$__po_name" in
    help_message|cmdline_options|cmdline_args|setup_keys|default_*|train_cmd|decode_cmd|cuda_cmd|cmd_backend)
      __po_die "unknown option $__po_opt (an internal variable of $0, not an option)" ;;
  esac
  __po_old=${!__po_name}
  if [ "$__po_old" = true ] || [ "$__po_old" = false ]; then
    if [ "$__po_value" != true ] && [ "$__po_value" != false ]; then
      __po_die "option $__po_opt takes true or false, got '$__po_value'"
    fi
  fi
  printf -v "$__po_name" '%s' "$__po_value"
  __po_given "$__po_name"
  __po_opt=
done

unset -v __po_i __po_arg __po_file __po_name __po_value __po_opt __po_old
unset -f __po_die __po_given
true

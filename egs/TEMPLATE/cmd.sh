# Job backends, Kaldi/ESPnet style. Stages run   $train_cmd JOB=1:N exp/log/x.JOB.log command ... JOB ...
#   train_cmd:  CPU jobs (feature extraction, training on CPU)
#   decode_cmd: decoding / scoring jobs
#   cuda_cmd:   jobs that need a GPU
# Choose the backend with `cmd_backend=slurm ./run.sh` (default: local).
cmd_backend=${cmd_backend:-local}

case "$cmd_backend" in
  local)
    export train_cmd="utils/run.pl"
    export decode_cmd="utils/run.pl"
    export cuda_cmd="utils/run.pl"
    ;;
  *)
    echo "cmd.sh: unknown cmd_backend '$cmd_backend' (known: local)" >&2
    return 1 2>/dev/null || exit 1
    ;;
esac

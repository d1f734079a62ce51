# Job backends, Kaldi/ESPnet style. Stages run   $train_cmd JOB=1:N exp/log/x.JOB.log command ... JOB ...
#   train_cmd:  CPU jobs (feature extraction, training on CPU)
#   decode_cmd: decoding / scoring jobs
#   cuda_cmd:   jobs that need a GPU (stages pass --gpu N, which the local backend ignores)
# Choose the backend with `cmd_backend=slurm ./run.sh` (default: local):
#   local  utils/run.pl: the jobs run on this machine (at most --max-jobs-run at once)
#   slurm  utils/slurm.pl: one Slurm array job per stage (sbatch --array=1-N --wait); sbatch options
#          from conf/slurm.conf of the recipe if it has one, else the toolkit's conf/slurm.conf
#          (partition, memory, GPUs, time limit: edit there). Run from a login node that shares
#          the file system with the compute nodes.
cmd_backend=${cmd_backend:-local}

case "$cmd_backend" in
  local)
    export train_cmd="utils/run.pl"
    export decode_cmd="utils/run.pl"
    export cuda_cmd="utils/run.pl"
    ;;
  slurm)
    export train_cmd="utils/slurm.pl"
    export decode_cmd="utils/slurm.pl --mem 4G"
    export cuda_cmd="utils/slurm.pl --gpu 1"
    ;;
  *)
    echo "cmd.sh: unknown cmd_backend '$cmd_backend' (known: local, slurm)" >&2
    return 1 2>/dev/null || exit 1
    ;;
esac

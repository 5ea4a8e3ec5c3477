"""A job whose second CUDA process is born while gtrace has the CUDA uprobes off (the first
process's agent records its own calls): the second must still get every GPU op linked to its
call, from its very first one (the agent asks gtrace's request before its session begins).

  python cuda_child_later.py GPU_STEPS SECOND_FILE STOP_FILE

Starts a gpu_steps child at once, a second one once SECOND_FILE exists (it loads CUDA and
launches at once); both run until STOP_FILE exists."""
import os
import subprocess
import sys
import time

gpu_steps, second_file, stop_file = sys.argv[1:4]
args = ["--kernels", "3", "--step-sleep-ms", "5", "--until-file", stop_file]
first = subprocess.Popen([gpu_steps] + args)
print(f"ready {os.getpid()}", flush=True)
while not os.path.exists(second_file):
    time.sleep(0.01)
second = subprocess.Popen([gpu_steps] + args)
sys.exit(first.wait() or second.wait())

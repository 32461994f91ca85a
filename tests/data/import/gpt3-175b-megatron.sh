# Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh as it runs: its torchrun command
# with the script's arrays and paths expanded (GPUS_PER_NODE=8, NUM_NODES=1; the paths are
# the script's positional arguments, written out here).
torchrun --nproc_per_node 8 --nnodes 1 --master_addr localhost --master_port 6000 \
    examples/classes/pretrain_gpt.py \
    --num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 \
    --max-position-embeddings 2048 --attention-backend auto \
    --micro-batch-size 1 --global-batch-size 1536 --rampup-batch-size 16 16 5859375 \
    --train-iters 500000 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 \
    --init-method-std 0.006 --clip-grad 1.0 --fp16 --lr 6.0e-5 --lr-decay-style cosine \
    --min-lr 6.0e-6 --lr-warmup-fraction .001 --lr-decay-iters 430000 \
    --tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 \
    --data-path /data/my-gpt3_00_text_document --vocab-file /data/gpt2-vocab.json \
    --merge-file /data/gpt2-merges.txt --split 949,50,1 \
    --log-interval 100 --save-interval 10000 --eval-interval 1000 --save /checkpoints/gpt3 \
    --load /checkpoints/gpt3 --eval-iters 10 --tensorboard-dir /logs/gpt3

# Writes the index and shard listing that the Hugging Face libraries produce
# for the tensors in tensors.json, independently of the Go code: the split
# follows huggingface_hub's split_state_dict_into_shards_factory, and the
# index is written as transformers' save_pretrained writes it (transformers 5:
# total_parameters is model.num_parameters(), the element count of every
# parameter, which for these tensors, all parameters, none packed, is the sum
# of their shapes' products).
#
#   python3 make_index.py
import json

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8}

with open("tensors.json") as f:
    spec = json.load(f)
max_size = spec["max_shard_size"]

shard_list, current, current_size, total, params = [], {}, 0, 0, 0
for t in spec["tensors"]:
    elems = 1
    for d in t["shape"]:
        elems *= d
    params += elems
    n = SIZES[t["dtype"]] * elems
    if n > max_size:
        total += n
        shard_list.append({t["name"]: n})
        continue
    if current_size + n > max_size:
        shard_list.append(current)
        current, current_size = {}, 0
    current[t["name"]] = n
    current_size += n
    total += n
if current:
    shard_list.append(current)

weight_map, shards = {}, {}
for i, shard in enumerate(shard_list):
    name = f"model-{i + 1:05d}-of-{len(shard_list):05d}.safetensors"
    shards[name] = list(shard)
    for key in shard:
        weight_map[key] = name

index = {"metadata": {"total_parameters": params, "total_size": total}, "weight_map": weight_map}
with open("model.safetensors.index.json", "w") as f:
    f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
with open("shards.json", "w") as f:
    f.write(json.dumps(shards, indent=2) + "\n")

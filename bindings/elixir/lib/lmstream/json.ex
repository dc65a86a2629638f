defmodule Lmstream.JSON do
  @moduledoc """
  A small, strict JSON encoder and decoder (RFC 8259), so the project needs
  no Hex package (Erlang/OTP 25 has no `json` module).

  Encoding: maps (atom or string keys), lists, binaries (must be UTF-8),
  integers, finite floats, `true`, `false`, `nil` (null), other atoms (as
  strings). Decoding: objects become maps with string keys, arrays lists,
  `null` is `nil`; numbers with a fraction or exponent are floats.
  """

  defmodule EncodeError do
    defexception [:message]
  end

  defmodule DecodeError do
    defexception [:message]
  end

  # ---- encoding --------------------------------------------------------

  @doc "Encodes a term as a JSON binary; raises `Lmstream.JSON.EncodeError`."
  @spec encode!(term) :: binary
  def encode!(term), do: term |> enc() |> IO.iodata_to_binary()

  @doc "Encodes a term as JSON: `{:ok, binary}` or `{:error, message}`."
  def encode(term) do
    {:ok, encode!(term)}
  rescue
    e in EncodeError -> {:error, e.message}
  end

  defp enc(nil), do: "null"
  defp enc(true), do: "true"
  defp enc(false), do: "false"
  defp enc(a) when is_atom(a), do: enc_string(Atom.to_string(a))
  defp enc(b) when is_binary(b), do: enc_string(b)
  defp enc(i) when is_integer(i), do: Integer.to_string(i)

  defp enc(f) when is_float(f) do
    # Shortest round-trip representation; JSON has no Inf/NaN and floats
    # are always finite on the BEAM.
    :erlang.float_to_binary(f, [:short])
  end

  defp enc([]), do: "[]"

  defp enc([{k, _} | _] = l) when is_atom(k) do
    if Keyword.keyword?(l), do: enc(Map.new(l)), else: [?[, enc_items(l), ?]]
  end

  defp enc([i]) when is_integer(i), do: [?[, Integer.to_string(i), ?]]
  defp enc(l) when is_list(l), do: [?[, enc_items(l), ?]]

  defp enc(%_{} = s),
    do: raise(EncodeError, message: "cannot encode struct #{inspect(s)} as JSON")

  defp enc(m) when is_map(m) do
    pairs =
      Enum.map_intersperse(m, ",", fn {k, v} ->
        [enc_key(k), ":", enc(v)]
      end)

    ["{", pairs, "}"]
  end

  defp enc(other), do: raise(EncodeError, message: "cannot encode #{inspect(other)} as JSON")

  defp enc_items([x]), do: [enc(x)]
  defp enc_items([x | rest]), do: [enc(x), ?, | enc_items(rest)]

  defp enc_key(k) when is_binary(k), do: enc_string(k)

  defp enc_key(k) when is_atom(k) and k not in [nil, true, false],
    do: enc_string(Atom.to_string(k))

  defp enc_key(k),
    do:
      raise(EncodeError, message: "JSON object keys must be strings or atoms, got #{inspect(k)}")

  defp enc_string(s) do
    unless String.valid?(s) do
      {at, byte} = first_invalid(s, 0)

      raise EncodeError,
        message:
          "string is not valid UTF-8 (byte 0x#{Base.encode16(<<byte>>, case: :lower)} at offset #{at}): " <>
            inspect(s, limit: 20)
    end

    [?", escape(s, 0, 0, []), ?"]
  end

  # The offset and value of the first byte that does not start a valid
  # UTF-8 sequence.
  defp first_invalid(<<c::utf8, rest::binary>>, at),
    do: first_invalid(rest, at + byte_size(<<c::utf8>>))

  defp first_invalid(<<b, _::binary>>, at), do: {at, b}

  # Copies runs of safe bytes as sub-binaries; escapes ", \\ and controls.
  defp escape(s, pos, start, acc) when pos == byte_size(s),
    do: [acc, binary_part(s, start, pos - start)]

  defp escape(s, pos, start, acc) do
    c = :binary.at(s, pos)

    if c == ?" or c == ?\\ or c < 0x20 do
      escape(s, pos + 1, pos + 1, [acc, binary_part(s, start, pos - start), esc_char(c)])
    else
      escape(s, pos + 1, start, acc)
    end
  end

  defp esc_char(?"), do: "\\\""
  defp esc_char(?\\), do: "\\\\"
  defp esc_char(?\n), do: "\\n"
  defp esc_char(?\r), do: "\\r"
  defp esc_char(?\t), do: "\\t"
  defp esc_char(?\b), do: "\\b"
  defp esc_char(?\f), do: "\\f"
  defp esc_char(c), do: "\\u" <> String.pad_leading(Integer.to_string(c, 16), 4, "0")

  # ---- decoding --------------------------------------------------------

  @doc "Decodes JSON: `{:ok, term}` or `{:error, message}`."
  def decode(bin) when is_binary(bin) do
    {:ok, decode!(bin)}
  rescue
    e in DecodeError -> {:error, e.message}
  end

  @doc "Decodes JSON; raises `Lmstream.JSON.DecodeError`."
  def decode!(bin) when is_binary(bin) do
    {value, rest} = value(skip_ws(bin), bin)

    case skip_ws(rest) do
      <<>> -> value
      _ -> fail(bin, rest, "trailing data")
    end
  end

  defp fail(orig, rest, what) do
    raise DecodeError, message: "JSON: #{what} at byte #{byte_size(orig) - byte_size(rest)}"
  end

  defp skip_ws(<<c, rest::binary>>) when c in [?\s, ?\t, ?\n, ?\r], do: skip_ws(rest)
  defp skip_ws(b), do: b

  defp value(<<?{, rest::binary>>, o), do: object(skip_ws(rest), o, [])
  defp value(<<?[, rest::binary>>, o), do: array(skip_ws(rest), o, [])
  defp value(<<?", rest::binary>>, o), do: string(rest, o, [])
  defp value(<<"true", rest::binary>>, _o), do: {true, rest}
  defp value(<<"false", rest::binary>>, _o), do: {false, rest}
  defp value(<<"null", rest::binary>>, _o), do: {nil, rest}
  defp value(<<c, _::binary>> = b, o) when c == ?- or c in ?0..?9, do: number(b, o)
  defp value(<<>> = b, o), do: fail(o, b, "unexpected end")
  defp value(b, o), do: fail(o, b, "unexpected character")

  defp object(<<?}, rest::binary>>, _o, []), do: {%{}, rest}

  defp object(<<?", rest::binary>>, o, acc) do
    {key, rest} = string(rest, o, [])

    case skip_ws(rest) do
      <<?:, rest::binary>> ->
        {v, rest} = value(skip_ws(rest), o)
        acc = [{key, v} | acc]

        case skip_ws(rest) do
          <<?,, rest::binary>> -> object(skip_ws(rest), o, acc)
          <<?}, rest::binary>> -> {Map.new(Enum.reverse(acc)), rest}
          rest -> fail(o, rest, "expected , or }")
        end

      rest ->
        fail(o, rest, "expected :")
    end
  end

  defp object(b, o, _), do: fail(o, b, "expected a string key")

  defp array(<<?], rest::binary>>, _o, []), do: {[], rest}

  defp array(b, o, acc) do
    {v, rest} = value(b, o)
    acc = [v | acc]

    case skip_ws(rest) do
      <<?,, rest::binary>> -> array(skip_ws(rest), o, acc)
      <<?], rest::binary>> -> {Enum.reverse(acc), rest}
      rest -> fail(o, rest, "expected , or ]")
    end
  end

  defp string(<<?", rest::binary>>, _o, acc), do: {IO.iodata_to_binary(Enum.reverse(acc)), rest}

  defp string(<<?\\, c, rest::binary>>, o, acc) when c in ~c'"\\/bfnrt' do
    ch =
      case c do
        ?b -> ?\b
        ?f -> ?\f
        ?n -> ?\n
        ?r -> ?\r
        ?t -> ?\t
        c -> c
      end

    string(rest, o, [ch | acc])
  end

  defp string(<<"\\u", h::binary-size(4), rest::binary>> = b, o, acc) do
    cp = hex4(h, o, b)

    cond do
      cp in 0xD800..0xDBFF ->
        case rest do
          <<"\\u", l::binary-size(4), rest2::binary>> ->
            lo = hex4(l, o, rest)

            if lo in 0xDC00..0xDFFF do
              c = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
              string(rest2, o, [<<c::utf8>> | acc])
            else
              fail(o, b, "unpaired surrogate")
            end

          _ ->
            fail(o, b, "unpaired surrogate")
        end

      cp in 0xDC00..0xDFFF ->
        fail(o, b, "unpaired surrogate")

      true ->
        string(rest, o, [<<cp::utf8>> | acc])
    end
  end

  defp string(<<?\\, _::binary>> = b, o, _), do: fail(o, b, "bad escape")

  defp string(<<c, _::binary>> = b, o, _) when c < 0x20,
    do: fail(o, b, "control character in string")

  defp string(<<c::utf8, rest::binary>>, o, acc), do: string(rest, o, [<<c::utf8>> | acc])
  defp string(<<>> = b, o, _), do: fail(o, b, "unterminated string")
  defp string(b, o, _), do: fail(o, b, "invalid UTF-8 in string")

  defp hex4(h, o, b) do
    case Integer.parse(h, 16) do
      {v, ""} -> v
      _ -> fail(o, b, "bad \\u escape")
    end
  end

  defp number(b, o) do
    {int_part, rest} = take_int(b, o)
    {frac, rest} = take_frac(rest, o)
    {exp, rest} = take_exp(rest, o)

    if frac == "" and exp == "" do
      {String.to_integer(int_part), rest}
    else
      frac = if frac == "", do: ".0", else: frac
      {String.to_float(int_part <> frac <> exp), rest}
    end
  end

  defp take_int(<<?-, rest::binary>>, o) do
    {digits, rest} = take_int(rest, o)
    {"-" <> digits, rest}
  end

  defp take_int(<<?0, rest::binary>>, _o), do: {"0", rest}

  defp take_int(<<c, _::binary>> = b, _o) when c in ?1..?9, do: digits(b, "")
  defp take_int(b, o), do: fail(o, b, "bad number")

  defp digits(<<c, rest::binary>>, acc) when c in ?0..?9, do: digits(rest, <<acc::binary, c>>)
  defp digits(rest, acc), do: {acc, rest}

  defp take_frac(<<?., c, _::binary>> = b, _o) when c in ?0..?9 do
    <<?., rest::binary>> = b
    {d, rest} = digits(rest, "")
    {"." <> d, rest}
  end

  defp take_frac(<<?., _::binary>> = b, o), do: fail(o, b, "bad number")
  defp take_frac(b, _o), do: {"", b}

  defp take_exp(<<e, rest::binary>> = b, o) when e in [?e, ?E] do
    {sign, rest} =
      case rest do
        <<s, r::binary>> when s in [?+, ?-] -> {<<s>>, r}
        r -> {"", r}
      end

    case digits(rest, "") do
      {"", _} -> fail(o, b, "bad exponent")
      {d, rest} -> {"e" <> sign <> d, rest}
    end
  end

  defp take_exp(b, _o), do: {"", b}
end
